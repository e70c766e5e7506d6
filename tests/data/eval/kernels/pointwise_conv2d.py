"""Fast-path kernel for eval/suites/cpu/pointwise_conv2d.py: 1x1 convolution as out[o] += w[o, c] * in[c], vectorized over pixels."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void pointwise(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t ci,
                          int64_t co, int64_t hw) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < co; ++o) {
            float* dst = y + (i * co + o) * hw;
            for (int64_t p = 0; p < hw; ++p) dst[p] = b[o];
            for (int64_t c = 0; c < ci; ++c) {
                const float kv = w[o * ci + c];
                const float* src = x + (i * ci + c) * hw;
                #pragma omp simd
                for (int64_t p = 0; p < hw; ++p) dst[p] += kv * src[p];
            }
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="pointwise_conv2d")
_lib.pointwise.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 96, kernel_size=1)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        n, ci, h, w = x.shape
        wt, b = self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()
        y = torch.empty(n, wt.shape[0], h, w, dtype=x.dtype)
        _lib.pointwise(ptr(x), ptr(wt), ptr(b), ptr(y), n, ci, wt.shape[0], h * w)
        return y
