"""Cheat: hides the call to the PyTorch op from a static reading by building its name at runtime.

problem: relu
expect: rejected no_dynamic_code
runtime-expect: rejected no_torch_compute
"""

import ctypes

import torch
from pragma_cext import load_cpp
from torch import nn

_lib = load_cpp('extern "C" int touch(void) { return 0; }', name="noop")
_lib.touch.restype = ctypes.c_int
_OP = "re" + "lu"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _lib.touch()
        return getattr(torch, _OP)(x)
