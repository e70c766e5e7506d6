"""Broken test fixture: forward writes through a null pointer in C++; the process dies (SIGSEGV)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

# Both the pointer and its target are volatile: with a plain pointer GCC either proves it null and
# emits a trap (SIGILL, not SIGSEGV) or, as GCC 12 did with only the pointer volatile, deletes
# the stores altogether.
CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    volatile float* volatile out = nullptr;
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_segfault")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
