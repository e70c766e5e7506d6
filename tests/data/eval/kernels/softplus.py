"""Fast-path kernel for eval/suites/cpu/softplus.py: softplus with torch's linear tail above 20, one pass."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void softplus(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v > 20.0f ? v : std::log1p(std::exp(v));
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="softplus")
_lib.softplus.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.softplus(ptr(x), ptr(y), x.numel())
        return y
