"""Tuner test fixture: a correct ReLU with one tunable, PASSES (how many times each element goes
through a step that leaves it unchanged to within an ulp). The declared default, 16, is slow on purpose; PASSES = 1 is several times faster, so a real sweep
has a real winner for the gate to accept. Its build call takes no flags, so the build knobs apply."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
constexpr int PASSES = 16;  // tune: 1 4 16
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i] > 0.f ? x[i] : 0.f;
        // sqrt(v * v) is v to within an ulp, and g++ may not drop it without -ffast-math
        for (int pass = 1; pass < PASSES; ++pass) v = std::sqrt(v * v);
        y[i] = v;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_tunable")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
