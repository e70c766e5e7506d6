"""Cheat: ReLU in place on the input and return it: no output allocation, and the caller's data is
destroyed (later calls see non-negative inputs and get cheaper or wrong).

problem: relu
expect: rejected inputs_unmodified
"""

import ctypes

from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_inplace(float* x, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu_inplace")
_lib.relu_inplace.argtypes = [ctypes.c_void_p, ctypes.c_int64]
_lib.relu_inplace.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _lib.relu_inplace(ptr(x), x.numel())
        return x
