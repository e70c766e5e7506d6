"""Fast-path kernel for eval/suites/cpu/max_pool2d.py: 3x3/2 max pooling with -inf padding."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <limits>
extern "C" void maxpool(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow) {
    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
        const float* src = x + p * h * w;
        for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
                float m = -std::numeric_limits<float>::infinity();
                for (int64_t di = 0; di < 3; ++di) {
                    const int64_t r = 2 * i - 1 + di;
                    if (r < 0 || r >= h) continue;
                    for (int64_t dj = 0; dj < 3; ++dj) {
                        const int64_t c = 2 * j - 1 + dj;
                        if (c >= 0 && c < w && src[r * w + c] > m) m = src[r * w + c];
                    }
                }
                y[(p * oh + i) * ow + j] = m;
            }
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="max_pool2d")
_lib.maxpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 5


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        oh, ow = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1
        y = torch.empty(n, c, oh, ow, dtype=x.dtype)
        _lib.maxpool(ptr(x), ptr(y), n * c, h, w, oh, ow)
        return y
