"""Fast-path kernel for eval/suites/cpu/l2_normalize.py: rows divided by max(norm, 1e-12), the norm summed in double."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void l2n(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        double ss = 0.0;
        #pragma omp simd reduction(+:ss)
        for (int64_t c = 0; c < cols; ++c) ss += (double)xr[c] * xr[c];
        const float inv = (float)(1.0 / std::fmax(std::sqrt(ss), 1e-12));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="l2_normalize")
_lib.l2n.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.l2n(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
