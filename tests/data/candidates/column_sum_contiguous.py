"""Profiler fixture for tests/data/problems/column_sum.py: row-by-row walk (contiguous loads).

Scalar on purpose (like column_sum_strided.py), so the pair differs in traversal order only.
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" __attribute__((optimize("no-tree-vectorize", "no-loop-interchange")))
void column_sum(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
    for (int64_t j = 0; j < cols; ++j) y[j] = 0.f;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) y[j] += x[i * cols + j];
}
"""

_lib = load_cpp(CPP_SOURCE, name="column_sum_contiguous")
_lib.column_sum.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
_lib.column_sum.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[1], dtype=x.dtype)
        _lib.column_sum(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
