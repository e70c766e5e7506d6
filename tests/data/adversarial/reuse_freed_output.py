"""Cheat: returns an uninitialized buffer of the output's size and hopes the allocator hands back
the block where the reference just wrote its (freed) output, which then reads as correct.

The verifier keeps the reference output alive while the candidate runs, so the stale memory is
never this trial's answer.

problem: relu
expect: mismatch
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

_lib = load_cpp('extern "C" void touch(const float* y) { (void)y; }', name="noop_ptr")
_lib.touch.argtypes = [ctypes.c_void_p]
_lib.touch.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _lib.touch(ptr(y))
        return y
