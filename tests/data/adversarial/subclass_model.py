"""Cheat: pastes the reference Model into the file and subclasses it, so forward is PyTorch's.

problem: relu
expect: rejected no_reference_model
runtime-expect: rejected no_torch_compute
"""

import ctypes

import torch
from pragma_cext import load_cpp
from torch import nn

_lib = load_cpp('extern "C" int touch(void) { return 0; }', name="noop")
_lib.touch.restype = ctypes.c_int


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


class ModelNew(Model):
    def forward(self, x):
        _lib.touch()
        return super().forward(x)
