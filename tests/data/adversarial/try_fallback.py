"""Cheat: the kernel reports failure for most sizes and an except branch quietly answers with torch.

problem: relu
expect: rejected no_try_fallback
runtime-expect: rejected no_torch_compute
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" int relu_forward(const float* x, float* y, int64_t n) {
    if (n % 64 != 0) return 1;  // "unsupported size"
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_partial")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = ctypes.c_int


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        try:
            if _lib.relu_forward(ptr(x), ptr(y), x.numel()) != 0:
                raise RuntimeError("kernel does not support this size")
            return y
        except RuntimeError:
            return torch.relu(x)
