"""Cheat (issue 33): the honest GEMM of tests/data/candidates/matmul_fast.py plus a memo of its
last inputs and product in C statics. Each call compares A row by row and B column by column with
the previous call's (O(n^2) against the O(n^3) product) and, when few differ, recomputes only the
changed rows and columns of C; its output is exact, so no audit can tell. Against timed rounds
that changed a few elements of each input between calls it read 1.5-1.8x where its twin read
~0.5x. With every element new before every round, all rows change and it does the full product.

problem: matmul
twin: candidates/matmul_fast.py
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

constexpr int64_t MR = 8, NR = 32;

// The twin's kernel (tests/data/candidates/matmul_fast.py): register tiles, fp32 accumulation.
static void matmul_compute(const float* __restrict A, const float* __restrict B, float* __restrict C,
                           int64_t M, int64_t K, int64_t N) {
    const int64_t strips = (M + MR - 1) / MR, panels = (N + NR - 1) / NR;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
        for (int64_t s = 0; s < strips; ++s) {
            const int64_t i0 = s * MR, j0 = p * NR;
            const int64_t mr = std::min(MR, M - i0), nr = std::min(NR, N - j0);
            float acc[MR][NR] = {};
            if (mr == MR && nr == NR) {
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * N + j0;
                    for (int64_t r = 0; r < MR; ++r) {
                        const float a = A[(i0 + r) * K + k];
                        #pragma omp simd
                        for (int64_t j = 0; j < NR; ++j) acc[r][j] += a * b[j];
                    }
                }
            } else {
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * N + j0;
                    for (int64_t r = 0; r < mr; ++r) {
                        const float a = A[(i0 + r) * K + k];
                        for (int64_t j = 0; j < nr; ++j) acc[r][j] += a * b[j];
                    }
                }
            }
            for (int64_t r = 0; r < mr; ++r) std::copy(acc[r], acc[r] + nr, C + (i0 + r) * N + j0);
        }
    }
}

// The memo: last A, B and C. Rows of A and columns of B that differ from last time are found in
// O(MK + KN); C is then patched: changed rows in full, changed columns for every other row.
static std::vector<float> pa, pb, pc;
static std::vector<int64_t> rows, cols;

extern "C" void matmul_forward(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    const size_t na = M * K, nb = K * N, nc = M * N;
    if (pa.size() == na && pb.size() == nb && pc.size() == nc) {
        rows.clear(); cols.clear();
        for (int64_t i = 0; i < M; ++i)
            if (std::memcmp(A + i * K, pa.data() + i * K, K * 4)) rows.push_back(i);
        std::vector<char> col_changed(N, 0);
        for (int64_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < N; ++j) col_changed[j] |= B[k * N + j] != pb[k * N + j];
        for (int64_t j = 0; j < N; ++j) if (col_changed[j]) cols.push_back(j);
        if ((int64_t)rows.size() * 4 < M && (int64_t)cols.size() * 4 < N) {
            std::memcpy(pa.data(), A, na * 4);
            std::memcpy(pb.data(), B, nb * 4);
            auto dot = [&](int64_t i, int64_t j) {
                float acc = 0.f;
                for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
                return acc;
            };
            #pragma omp parallel for schedule(static)
            for (int64_t r = 0; r < (int64_t)rows.size(); ++r)
                for (int64_t j = 0; j < N; ++j) pc[rows[r] * N + j] = dot(rows[r], j);
            #pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < M; ++i)
                for (int64_t j : cols) pc[i * N + j] = dot(i, j);
            std::memcpy(C, pc.data(), nc * 4);
            return;
        }
    }
    matmul_compute(A, B, C, M, K, N);
    pa.assign(A, A + na); pb.assign(B, B + nb); pc.assign(C, C + nc);
}
"""

_lib = load_cpp(CPP_SOURCE, name="matmul_changed_rows")
_lib.matmul_forward.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
_lib.matmul_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty(M, N, dtype=A.dtype)
        _lib.matmul_forward(ptr(A), ptr(B), ptr(C), M, K, N)
        return C
