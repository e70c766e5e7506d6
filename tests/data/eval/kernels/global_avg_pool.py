"""Fast-path kernel for eval/suites/cpu/global_avg_pool.py: plane means summed in double."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void plane_mean(const float* x, float* y, int64_t planes, int64_t size) {
    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (int64_t i = 0; i < size; ++i) s += x[p * size + i];
        y[p] = (float)(s / size);
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="global_avg_pool")
_lib.plane_mean.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty(n, c, dtype=x.dtype)
        _lib.plane_mean(ptr(x), ptr(y), n * c, h * w)
        return y
