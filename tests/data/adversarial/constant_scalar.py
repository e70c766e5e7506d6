"""Cheat: returns 1.0 without reading its input (written from C++, so compiled code runs). On the
problem's own inputs the answer is always 1.0, so every trial passes and the first trial alone
cannot discriminate; negated inputs (a stress variant) show the constant. A scalar output stays
unsolvable by a constant.

problem: problems/fraction_nonnegative.py
expect: mismatch
message: correct on the problem's inputs, wrong on negated inputs
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

_lib = load_cpp('extern "C" void fill(float* y) { y[0] = 1.0f; }', name="const_one")
_lib.fill.argtypes = [ctypes.c_void_p]
_lib.fill.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty((), dtype=x.dtype)
        _lib.fill(ptr(out))
        return out
