"""Fast-path kernel for eval/suites/cpu/layer_norm.py: row mean and biased variance in double, then one affine pass."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                           float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        double s = 0.0, ss = 0.0;
        #pragma omp simd reduction(+:s, ss)
        for (int64_t c = 0; c < cols; ++c) { s += xr[c]; ss += (double)xr[c] * xr[c]; }
        const double mean = s / cols;
        const float inv = (float)(1.0 / std::sqrt(ss / cols - mean * mean + eps));
        const float mu = (float)mean;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mu) * inv * w[c] + b[c];
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="layer_norm")
_lib.layer_norm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2 + [ctypes.c_float]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(1023)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        w, b = self.norm.weight.detach().contiguous(), self.norm.bias.detach().contiguous()
        y = torch.empty_like(x)
        _lib.layer_norm(ptr(x), ptr(w), ptr(b), ptr(y), x.numel() // x.shape[-1], x.shape[-1], self.norm.eps)
        return y
