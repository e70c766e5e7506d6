"""Fast-path kernel for eval/suites/cpu/sigmoid.py: logistic sigmoid, one pass."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void sigmoid(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 1.0f / (1.0f + std::exp(-v));
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="sigmoid")
_lib.sigmoid.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.sigmoid(ptr(x), ptr(y), x.numel())
        return y
