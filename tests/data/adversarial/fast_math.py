"""Cheat: an otherwise honest kernel built with -ffast-math. GCC links crtfastmath.o into the
shared object, and loading it turns on flush-to-zero/denormals-are-zero for the whole process,
the reference included.

problem: relu
expect: rejected no_fast_math
runtime-expect: rejected fp_environment
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, extra_flags=("-ffast-math",), name="relu_fastmath")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
