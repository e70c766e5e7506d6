"""Cheat: does the work with numpy (someone else's vectorized kernel) and calls a no-op kernel.

problem: relu
expect: rejected no_library_compute
"""

import ctypes

import numpy as np
import torch
from pragma_cext import load_cpp
from torch import nn

_lib = load_cpp('extern "C" int touch(void) { return 0; }', name="noop")
_lib.touch.restype = ctypes.c_int


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _lib.touch()
        return torch.from_numpy(np.maximum(x.numpy(), 0))
