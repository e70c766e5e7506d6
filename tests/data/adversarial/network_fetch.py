"""Cheat: asks a server for precomputed outputs (falls back to nothing when offline).

problem: relu
expect: rejected no_network
"""

import ctypes
import urllib.request

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
        payload = urllib.request.urlopen("http://answers.invalid/relu", timeout=1).read()
        y.view(-1)[: len(payload) // 4] = torch.frombuffer(bytearray(payload), dtype=torch.float32)
        _lib.touch(ptr(y))
        return y
