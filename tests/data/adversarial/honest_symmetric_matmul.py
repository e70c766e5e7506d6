"""Honest: A @ B reading B by rows as if it were B.T, which is right because the problem states
that B is symmetric. The stress variants keep that symmetry (signs mixed as a symmetric pattern,
never elementwise), so this kernel must stay ok.

problem: problems/symmetric_matmul.py
expect: ok
stress-used: negated, scaled x1e-03, scaled x1e+03, mixed signs
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
// C[i][j] = sum_k A[i][k] * B[k][j] = sum_k A[i][k] * B[j][k]  (B symmetric): both rows contiguous.
extern "C" void matmul_sym(const float* A, const float* B, float* C, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float acc = 0.f;
            #pragma omp simd reduction(+:acc)
            for (int64_t k = 0; k < n; ++k) acc += A[i * n + k] * B[j * n + k];
            C[i * n + j] = acc;
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="matmul_sym")
_lib.matmul_sym.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64]
_lib.matmul_sym.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty_like(A)
        _lib.matmul_sym(ptr(A), ptr(B), ptr(C), A.shape[0])
        return C
