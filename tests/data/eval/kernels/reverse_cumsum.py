"""Fast-path kernel for eval/suites/cpu/reverse_cumsum.py: suffix sums in one backward pass per row (no flipped copies)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void suffix_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t c = cols - 1; c >= 0; --c) { s += x[r * cols + c]; y[r * cols + c] = (float)s; }
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="reverse_cumsum")
_lib.suffix_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.suffix_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
