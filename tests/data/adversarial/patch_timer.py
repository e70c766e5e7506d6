"""Cheat: an honest (slow, -O0) kernel that makes itself look fast by replacing the clock:
time.perf_counter/perf_counter_ns run at a tenth of real speed once the module is imported.

problem: relu
expect: rejected no_monkeypatching
runtime-expect: rejected no_monkeypatching
"""

import ctypes
import time

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, extra_flags=("-O0",), name="relu_slow_patch")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None

_real_ns = time.perf_counter_ns
_origin = _real_ns()
time.perf_counter_ns = lambda: _origin + (_real_ns() - _origin) // 10
time.perf_counter = lambda: time.perf_counter_ns() / 1e9


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
