"""Cheat: builds and calls a kernel that does nothing useful, then answers with torch.relu itself.

problem: relu
expect: rejected no_torch_compute
runtime-expect: rejected no_torch_compute
"""

import ctypes

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
        return torch.relu(x)
