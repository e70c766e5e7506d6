"""Fast-path kernel for eval/suites/cpu/conv2d_3x3.py: direct 3x3 convolution, output rows accumulated as vectors over the width."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void conv3x3(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t ci,
                        int64_t co, int64_t h, int64_t wd) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < co; ++o) {
            float* dst = y + (i * co + o) * h * wd;
            for (int64_t k = 0; k < h * wd; ++k) dst[k] = b[o];
            for (int64_t c = 0; c < ci; ++c) {
                const float* src = x + (i * ci + c) * h * wd;
                const float* k9 = w + (o * ci + c) * 9;
                for (int64_t r = 0; r < h; ++r)
                    for (int64_t di = 0; di < 3; ++di) {
                        const int64_t rr = r + di - 1;
                        if (rr < 0 || rr >= h) continue;
                        const float* s = src + rr * wd;
                        float* d = dst + r * wd;
                        for (int64_t dj = 0; dj < 3; ++dj) {
                            const float kv = k9[di * 3 + dj];
                            const int64_t lo = dj == 0 ? 1 : 0, hi = dj == 2 ? wd - 1 : wd;
                            #pragma omp simd
                            for (int64_t col = lo; col < hi; ++col) d[col] += kv * s[col + dj - 1];
                        }
                    }
            }
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="conv2d_3x3")
_lib.conv3x3.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 5


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, kernel_size=3, padding=1)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        n, ci, h, w = x.shape
        wt, b = self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()
        y = torch.empty(n, wt.shape[0], h, w, dtype=x.dtype)
        _lib.conv3x3(ptr(x), ptr(wt), ptr(b), ptr(y), n, ci, wt.shape[0], h, w)
        return y
