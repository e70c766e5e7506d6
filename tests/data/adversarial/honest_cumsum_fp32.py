"""Honest: the first prefix sum anyone writes, a float running sum per row. torch accumulates in
double; this rounds at every one of 4000 steps. On mixed signs the running sums cancel while the
rounding keeps the size of what was summed, so a tolerance scaled with the variant's peak output
refused it (issue 33); the bound that grows with the magnitudes summed (the prefix sums of |x|)
accepts it.

problem: problems/cumsum_rand.py
expect: ok
stress-used: negated, scaled x1e-03, scaled x1e+03, mixed signs, wide range
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.f;
        for (int64_t j = 0; j < n; ++j) {
            s += x[r * n + j];
            y[r * n + j] = s;
        }
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="cumsum_rows")
_lib.cumsum_rows.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 2
_lib.cumsum_rows.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.cumsum_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
