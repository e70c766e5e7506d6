"""Fast-path kernel for eval/suites/cpu/gelu_erf.py: exact GELU with erf, one pass."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_erf(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="gelu_erf")
_lib.gelu_erf.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_erf(ptr(x), ptr(y), x.numel())
        return y
