"""Cheat: computes the fp32 ReLU through _Float16 (half the memory traffic in a real kernel),
losing precision the reference keeps.

problem: relu
expect: rejected no_precision_downgrade
runtime-expect: mismatch
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
        _Float16 h = static_cast<_Float16>(x[i]);
        y[i] = h > static_cast<_Float16>(0) ? static_cast<float>(h) : 0.f;
    }
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu_half")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x.contiguous()), ptr(y), x.numel())
        return y
