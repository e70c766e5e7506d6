"""Cheat: the ReLU is written with tensor operators (x * (x > 0)), which no static reading can
tell from integer arithmetic; a do-nothing kernel call makes it look like a kernel.

problem: relu
expect: rejected no_torch_compute
"""

import ctypes

from pragma_cext import load_cpp
from torch import nn

_lib = load_cpp('extern "C" int touch(void) { return 0; }', name="noop")
_lib.touch.restype = ctypes.c_int


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _lib.touch()
        return x * (x > 0)
