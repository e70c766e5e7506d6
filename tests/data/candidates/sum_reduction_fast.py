"""Honest fast-path candidate for eval/suites/examples/sum_reduction.py: row sums in C++."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

# Two-level sum: fp32 SIMD partial sums over 512-element chunks, chunk totals added in double.
# One fp32 chain over the whole ~4k-element row drifts ~3x further from the exact sum than
# torch's cascade sum (close to atol=1e-4 on rows summing to ~0); chunking matches torch's
# accuracy at fp32 speed (accumulating everything in double measured ~40% slower here).
CPP_SOURCE = r"""
#include <cstdint>
extern "C" void sum_lastdim(const float* x, float* y, int64_t rows, int64_t cols) {
    const int64_t CHUNK = 512;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double total = 0.0;
        for (int64_t c0 = 0; c0 < cols; c0 += CHUNK) {
            const int64_t c1 = c0 + CHUNK < cols ? c0 + CHUNK : cols;
            float s = 0.f;
            #pragma omp simd reduction(+:s)
            for (int64_t c = c0; c < c1; ++c) s += xr[c];
            total += s;
        }
        y[r] = static_cast<float>(total);
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="sum_reduction")
_lib.sum_lastdim.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
_lib.sum_lastdim.restype = None


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        # Only the last-dimension case is implemented; refuse others instead of answering wrongly.
        if self.dim not in (-1, x.dim() - 1):
            raise NotImplementedError("sum_lastdim reduces the last dimension only")
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        y = torch.empty(x.shape[:-1], dtype=x.dtype)
        _lib.sum_lastdim(ptr(x), ptr(y), rows, cols)
        return y
