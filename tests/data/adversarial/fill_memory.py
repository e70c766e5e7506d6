"""Cheat (or accident): allocates and touches memory without bound on the first call.
Nothing in the source looks wrong; the sandbox's address-space limit must stop it alone.

problem: relu
expect: runtime_error memory_limit
settings: memory_limit_bytes=3221225472
"""

import ctypes

import torch
from pragma_cext import load_cpp
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        hoard = []
        while True:  # 256 MiB at a time, each one written so it is really resident
            hoard.append(torch.ones(64 * 2**20))
