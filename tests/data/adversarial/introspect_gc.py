"""Cheat: searches the process's heap (gc) for a tensor that already holds the answer (the
reference's output, alive next to the call) and returns a copy of it.

problem: relu
expect: rejected no_introspection
"""

import ctypes
import gc

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
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                if bool((obj >= 0).all()) and torch.equal(obj, torch.clamp(x, min=0)):
                    _lib.touch(ptr(obj))
                    return obj.clone()
        return torch.zeros_like(x)
