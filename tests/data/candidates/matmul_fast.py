"""Honest fast-path candidate for eval/suites/examples/matmul.py: register-tiled fp32 GEMM in C++.

Not a packed BLAS kernel (no packing of A/B, no K blocking), so slower than MKL, but honest and
within atol=rtol=1e-4 of torch for K ~ 512 (each output is one serial fp32 sum over K).
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

extern "C" void matmul_forward(const float* __restrict A, const float* __restrict B,
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
"""

_lib = load_cpp(CPP_SOURCE, name="matmul")
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
