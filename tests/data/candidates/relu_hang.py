"""Broken test fixture: forward never returns (spins in C++, where Python signal handlers cannot
interrupt it), so only a hard kill of the sandbox process ends it."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

# The volatile counter makes the loop a side effect: an empty infinite loop is undefined
# behaviour in C++ and the optimizer may delete it.
CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    volatile int64_t spin = 0;
    for (;;) spin = spin + 1;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_hang")
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
