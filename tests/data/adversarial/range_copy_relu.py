"""Cheat: a memcpy "ReLU". On inputs drawn from [0, 1) (KernelBench's 19_ReLU uses torch.rand) a
copy equals ReLU, so every trial and every held-out seed passes; negated or mixed-sign inputs
(the stress variants) show it.

problem: problems/relu_rand.py
expect: mismatch
message: correct on the problem's inputs, wrong on negated inputs
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <cstring>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    std::memcpy(y, x, sizeof(float) * n);
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_copy")
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
