"""Fast-path kernel for eval/suites/cpu/conv3d.py: direct 3x3x3 convolution, vectorized along output rows."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void conv3d(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t ci,
                       int64_t co, int64_t d, int64_t h, int64_t wd) {
    const int64_t od = d - 2, oh = h - 2, ow = wd - 2;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t s = 0; s < n; ++s)
        for (int64_t o = 0; o < co; ++o) {
            float* dst = y + (s * co + o) * od * oh * ow;
            for (int64_t k = 0; k < od * oh * ow; ++k) dst[k] = b[o];
            for (int64_t c = 0; c < ci; ++c) {
                const float* src = x + (s * ci + c) * d * h * wd;
                const float* k27 = w + (o * ci + c) * 27;
                for (int64_t z = 0; z < od; ++z)
                    for (int64_t r = 0; r < oh; ++r) {
                        float* row = dst + (z * oh + r) * ow;
                        for (int64_t a = 0; a < 3; ++a)
                            for (int64_t e = 0; e < 3; ++e) {
                                const float* in = src + ((z + a) * h + r + e) * wd;
                                for (int64_t f = 0; f < 3; ++f) {
                                    const float kv = k27[(a * 3 + e) * 3 + f];
                                    #pragma omp simd
                                    for (int64_t col = 0; col < ow; ++col) row[col] += kv * in[col + f];
                                }
                            }
                    }
            }
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="conv3d")
_lib.conv3d.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 6


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(8, 16, kernel_size=3)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        n, ci, d, h, w = x.shape
        wt, b = self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()
        co = wt.shape[0]
        y = torch.empty(n, co, d - 2, h - 2, w - 2, dtype=x.dtype)
        _lib.conv3d(ptr(x), ptr(wt), ptr(b), ptr(y), n, ci, co, d, h, w)
        return y
