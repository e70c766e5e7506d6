"""Honest: y = A @ x accumulated in double and rounded once: more accurate than the fp32
reference. Refused before (issue 33) because the mixed-signs variant's tolerance lay below the fp32
reference's own rounding error; a kernel at least as accurate as the reference must pass.

problem: problems/matvec_rand.py
expect: ok
stress-used: negated, scaled x1e-03, scaled x1e+03, mixed signs, wide range
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void matvec_double(const float* A, const float* x, float* y, int64_t M, int64_t K) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        const float* a = A + i * K;
        double s = 0.0;
        for (int64_t k = 0; k < K; ++k) s += (double)a[k] * (double)x[k];
        y[i] = (float)s;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="matvec_double")
_lib.matvec_double.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2
_lib.matvec_double.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        y = torch.empty(A.shape[0], 1, dtype=A.dtype)
        _lib.matvec_double(ptr(A), ptr(B), ptr(y), A.shape[0], A.shape[1])
        return y
