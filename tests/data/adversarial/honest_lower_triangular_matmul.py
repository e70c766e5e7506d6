"""Honest: tril(A @ B) summing only k in [j, i], which is right because the problem states that
A and B are lower triangular. The stress variants keep the zeros where they are (negation,
scaling and elementwise sign flips), so this kernel must stay ok.

problem: problems/lower_triangular_matmul.py
expect: ok
stress-used: negated, scaled x1e-03, scaled x1e+03, mixed signs
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void tril_matmul(const float* A, const float* B, float* C, int64_t n) {
    #pragma omp parallel for schedule(dynamic, 8)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float acc = 0.f;
            for (int64_t k = j; k <= i; ++k) acc += A[i * n + k] * B[k * n + j];
            C[i * n + j] = j <= i ? acc : 0.f;
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="tril_matmul")
_lib.tril_matmul.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64]
_lib.tril_matmul.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty_like(A)
        _lib.tril_matmul(ptr(A), ptr(B), ptr(C), A.shape[0])
        return C
