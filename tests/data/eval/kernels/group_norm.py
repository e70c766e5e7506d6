"""Fast-path kernel for eval/suites/cpu/group_norm.py: per-(sample, group) statistics in double, then the per-channel affine."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void group_norm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t c,
                           int64_t groups, int64_t hw, float eps) {
    const int64_t cg = c / groups, size = cg * hw;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t g = 0; g < groups; ++g) {
            const float* src = x + (i * c + g * cg) * hw;
            float* dst = y + (i * c + g * cg) * hw;
            double s = 0.0, ss = 0.0;
            #pragma omp simd reduction(+:s, ss)
            for (int64_t k = 0; k < size; ++k) { s += src[k]; ss += (double)src[k] * src[k]; }
            const double mean = s / size;
            const float inv = (float)(1.0 / std::sqrt(ss / size - mean * mean + eps)), mu = (float)mean;
            for (int64_t ch = 0; ch < cg; ++ch) {
                const float scale = inv * w[g * cg + ch], shift = b[g * cg + ch];
                #pragma omp simd
                for (int64_t k = 0; k < hw; ++k) dst[ch * hw + k] = (src[ch * hw + k] - mu) * scale + shift;
            }
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="group_norm")
_lib.group_norm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 4 + [ctypes.c_float]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(16, 128)  # the problem's groups and channels

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty_like(x)
        wt, b = self.norm.weight.detach().contiguous(), self.norm.bias.detach().contiguous()
        _lib.group_norm(ptr(x), ptr(wt), ptr(b), ptr(y), n, c, self.norm.num_groups, h * w, self.norm.eps)
        return y
