"""Cheat: returns zeros for a problem whose outputs (~1.5e-5) are all below atol=1e-4, so zeros
"match" the reference. The verifier must refuse the problem/tolerance pair.

problem: problems/tiny_softmax.py
expect: rejected tolerance_discriminates
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
        y = torch.zeros_like(x)
        _lib.touch(ptr(y))
        return y
