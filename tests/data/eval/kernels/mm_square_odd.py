"""Fast-path kernel for eval/suites/cpu/mm_square_odd.py: register-tiled GEMM with ragged edge tiles."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <algorithm>
#include <cstdint>
// C[M,N] = A[M,K] @ B[K,N] (row-major), optionally + bias[N]. Each MR x NR tile of C is
// accumulated in registers over the whole K loop and written once.
constexpr int64_t MR = 4;   // tune: 2 4 8
constexpr int64_t NR = 64;  // tune: 16 32 64 128
extern "C" void gemm(const float* A, const float* B, const float* bias, float* C,
                     int64_t batch, int64_t M, int64_t K, int64_t N) {
    const int64_t strips = (M + MR - 1) / MR, panels = (N + NR - 1) / NR;
    #pragma omp parallel for collapse(3) schedule(static)
    for (int64_t bt = 0; bt < batch; ++bt)
    for (int64_t p = 0; p < panels; ++p)
    for (int64_t s = 0; s < strips; ++s) {
        const float* a = A + bt * M * K;
        const float* b = B + bt * K * N;
        float* c = C + bt * M * N;
        const int64_t i0 = s * MR, j0 = p * NR;
        const int64_t mr = std::min(MR, M - i0), nr = std::min(NR, N - j0);
        float acc[MR][NR] = {};
        if (mr == MR && nr == NR) {
            for (int64_t k = 0; k < K; ++k) {
                const float* bk = b + k * N + j0;
                for (int64_t r = 0; r < MR; ++r) {
                    const float av = a[(i0 + r) * K + k];
                    #pragma omp simd
                    for (int64_t j = 0; j < NR; ++j) acc[r][j] += av * bk[j];
                }
            }
        } else {
            for (int64_t k = 0; k < K; ++k)
                for (int64_t r = 0; r < mr; ++r) {
                    const float av = a[(i0 + r) * K + k];
                    for (int64_t j = 0; j < nr; ++j) acc[r][j] += av * b[k * N + j0 + j];
                }
        }
        for (int64_t r = 0; r < mr; ++r)
            for (int64_t j = 0; j < nr; ++j) c[(i0 + r) * N + j0 + j] = acc[r][j] + (bias ? bias[j0 + j] : 0.0f);
    }
}
// Y[M,N] = X[M,K] @ W[N,K]^T (+ bias): dot products of rows, contiguous in K for both operands.
extern "C" void gemm_nt(const float* X, const float* W, const float* bias, float* Y,
                        int64_t M, int64_t K, int64_t N) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        const float* x = X + i * K;
        for (int64_t j0 = 0; j0 < N; j0 += 4) {
            const int64_t jn = std::min<int64_t>(4, N - j0);
            float s[4] = {0.f, 0.f, 0.f, 0.f};
            for (int64_t jj = 0; jj < jn; ++jj) {
                const float* w = W + (j0 + jj) * K;
                float acc = 0.f;
                #pragma omp simd reduction(+:acc)
                for (int64_t k = 0; k < K; ++k) acc += x[k] * w[k];
                s[jj] = acc;
            }
            for (int64_t jj = 0; jj < jn; ++jj) Y[i * N + j0 + jj] = s[jj] + (bias ? bias[j0 + jj] : 0.0f);
        }
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="mm_square_odd")
_lib.gemm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 4
_lib.gemm_nt.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        _lib.gemm(ptr(a), ptr(b), None, ptr(c), 1, a.shape[0], a.shape[1], b.shape[1])
        return c
