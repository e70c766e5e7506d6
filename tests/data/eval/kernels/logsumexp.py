"""Fast-path kernel for eval/suites/cpu/logsumexp.py: row-wise log-sum-exp, max-shifted."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <limits>
// Per row: max, then the sum of exp(x - max) in double, then the row's log-sum-exp.
extern "C" void rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -std::numeric_limits<float>::infinity();
        #pragma omp simd reduction(max:m)
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += std::exp((double)(xr[c] - m));
        const float lse = (float)(m + std::log(s));
        y[r] = lse;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="logsumexp")
_lib.rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype)
        _lib.rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
