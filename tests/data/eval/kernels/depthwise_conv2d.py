"""Fast-path kernel for eval/suites/cpu/depthwise_conv2d.py: direct 3x3 depthwise convolution."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

# Interior columns run a branch-free vectorizable loop; only the two border columns and the
# border rows take the bounds-checked path.
CPP_SOURCE = r"""
#include <cstdint>
extern "C" void dw3x3(const float* x, const float* w, const float* b, float* y,
                      int64_t n, int64_t c, int64_t h, int64_t wd) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t ch = 0; ch < c; ++ch) {
            const float* src = x + (i * c + ch) * h * wd;
            float* dst = y + (i * c + ch) * h * wd;
            const float* k = w + ch * 9;
            for (int64_t r = 0; r < h; ++r) {
                auto at = [&](int64_t rr, int64_t cc) -> float {
                    return (rr < 0 || rr >= h || cc < 0 || cc >= wd) ? 0.f : src[rr * wd + cc];
                };
                auto edge = [&](int64_t col) {
                    float s = b[ch];
                    for (int di = 0; di < 3; ++di)
                        for (int dj = 0; dj < 3; ++dj) s += k[di * 3 + dj] * at(r + di - 1, col + dj - 1);
                    dst[r * wd + col] = s;
                };
                if (r == 0 || r == h - 1) {
                    for (int64_t col = 0; col < wd; ++col) edge(col);
                    continue;
                }
                edge(0);
                const float* up = src + (r - 1) * wd;
                const float* mid = src + r * wd;
                const float* dn = src + (r + 1) * wd;
                #pragma omp simd
                for (int64_t col = 1; col < wd - 1; ++col) {
                    dst[r * wd + col] = b[ch]
                        + k[0] * up[col - 1] + k[1] * up[col] + k[2] * up[col + 1]
                        + k[3] * mid[col - 1] + k[4] * mid[col] + k[5] * mid[col + 1]
                        + k[6] * dn[col - 1] + k[7] * dn[col] + k[8] * dn[col + 1];
                }
                edge(wd - 1);
            }
        }
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="dw3x3")
_lib.dw3x3.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 4
_lib.dw3x3.restype = None

CHANNELS = 64  # the problem's size, so the seeded parameters match the reference's


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(CHANNELS, CHANNELS, kernel_size=3, padding=1, groups=CHANNELS)

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.detach().contiguous()
        b = self.conv.bias.detach().contiguous()
        n, c, h, wd = x.shape
        y = torch.empty_like(x)
        _lib.dw3x3(ptr(x), ptr(w), ptr(b), ptr(y), n, c, h, wd)
        return y
