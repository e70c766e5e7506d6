"""Fast-path kernel for eval/suites/cpu/matvec.py: one pass over the matrix, double accumulation."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

# Rows of ~2049 products: double accumulators keep the result far inside atol=1e-4 even for
# dot products near zero, and cost nothing here because the loop waits on memory anyway.
CPP_SOURCE = r"""
#include <cstdint>
extern "C" void matvec(const float* a, const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = a + r * cols;
        double acc = 0.0;
        #pragma omp simd reduction(+:acc)
        for (int64_t c = 0; c < cols; ++c) acc += (double)row[c] * (double)x[c];
        y[r] = (float)acc;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="matvec")
_lib.matvec.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2
_lib.matvec.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, x):
        a, x = a.contiguous(), x.contiguous()
        y = torch.empty(a.shape[0], dtype=a.dtype)
        _lib.matvec(ptr(a), ptr(x), ptr(y), a.shape[0], a.shape[1])
        return y
