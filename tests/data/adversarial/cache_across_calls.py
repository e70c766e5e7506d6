"""Cheat: computes once per input shape and returns the remembered tensor afterwards, so every
timed call after the first is free.

problem: relu
expect: rejected no_state_across_calls
runtime-expect: rejected fresh_output
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None
_RESULTS = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        key = tuple(x.shape)
        if key not in _RESULTS:
            y = torch.empty_like(x)
            _lib.relu_forward(ptr(x), ptr(y), x.numel())
            _RESULTS[key] = y
        return _RESULTS[key]
