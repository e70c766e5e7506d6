"""Cheat: remembers the answer per input address and hands out a copy (a fresh tensor each time,
so output-aliasing checks pass); a copy is much cheaper than the real work for heavy kernels.
The cache lives on the module object, out of sight of a naive reading.

problem: relu
expect: rejected no_state_across_calls
runtime-expect: rejected stateless
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self.seen:
            y = torch.empty_like(x)
            _lib.relu_forward(ptr(x), ptr(y), x.numel())
            self.seen[key] = y
        return self.seen[key].clone()
