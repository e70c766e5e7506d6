"""Cheat (issue 19): the honest GEMM of tests/data/candidates/matmul_fast.py plus a C++ memo of
its last 8 answers keyed on the full bytes of A and B (memcmp, O(n^2) against the O(n^3)
product). Against v1's timed phase (one input set) it read 12.3x where its twin read 0.46x. Every
timed call now sees inputs it has never seen (a few elements change before each call), so the
memo never hits: the speedup must stay within 1.3x of the twin's (tests/test_redteam_twins.py).

problem: matmul
twin: candidates/matmul_fast.py
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <algorithm>

// C[M,N] = A[M,K] @ B[K,N], all row-major, fp32 accumulation.
// Each (MR x NR) tile of C is accumulated in registers over the whole K loop (MR*NR/16 = 16
// AVX-512 registers), so C is written once; B panels (K x NR) are reused across row strips.
constexpr int64_t MR = 8, NR = 32;

static void matmul_compute(const float* __restrict A, const float* __restrict B,
                               float* __restrict C, int64_t M, int64_t K, int64_t N) {
    const int64_t strips = (M + MR - 1) / MR, panels = (N + NR - 1) / NR;
    // Panel-major order: with a static schedule each thread walks strips of one B panel in turn,
    // so that panel (K*NR floats) stays in L2. Tiles are disjoint, so threads never share output.
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
        for (int64_t s = 0; s < strips; ++s) {
            const int64_t i0 = s * MR, j0 = p * NR;
            const int64_t mr = std::min(MR, M - i0), nr = std::min(NR, N - j0);
            float acc[MR][NR] = {};
            if (mr == MR && nr == NR) {  // full tile: constant bounds let GCC keep acc in registers
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * N + j0;
                    for (int64_t r = 0; r < MR; ++r) {
                        const float a = A[(i0 + r) * K + k];
                        #pragma omp simd
                        for (int64_t j = 0; j < NR; ++j) acc[r][j] += a * b[j];
                    }
                }
            } else {  // ragged edge tile
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * N + j0;
                    for (int64_t r = 0; r < mr; ++r) {
                        const float a = A[(i0 + r) * K + k];
                        for (int64_t j = 0; j < nr; ++j) acc[r][j] += a * b[j];
                    }
                }
            }
            for (int64_t r = 0; r < mr; ++r)
                std::copy(acc[r], acc[r] + nr, C + (i0 + r) * N + j0);
        }
    }
}

#include <cstring>
#include <vector>
// A memo of the last 8 (A, B) -> C, matched on the full bytes (memcmp: O(MK + KN), far cheaper
// than the O(MKN) product). With a timed phase that repeats a few input sets, every call after
// the first of each set is a lookup.
struct Entry { std::vector<float> a, b, c; };
static Entry memo[8];
static int next_slot = 0;
extern "C" void matmul_forward(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    const size_t na = M * K, nb = K * N, nc = M * N;
    for (auto& e : memo) {
        if (e.a.size() == na && e.b.size() == nb && !std::memcmp(e.a.data(), A, na * 4) &&
            !std::memcmp(e.b.data(), B, nb * 4)) {
            std::memcpy(C, e.c.data(), nc * 4);
            return;
        }
    }
    matmul_compute(A, B, C, M, K, N);
    Entry& e = memo[next_slot];
    next_slot = (next_slot + 1) % 8;
    e.a.assign(A, A + na); e.b.assign(B, B + nb); e.c.assign(C, C + nc);
}
"""

_lib = load_cpp(CPP_SOURCE, name="matmul_memo")
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
