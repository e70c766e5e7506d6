"""Cheat: exact GELU except below -1.5, where it returns 0 (gelu(-2) is -0.045): a clamp that the
classic stress variants of torch.rand inputs never reach (negated: (-1, 0]; scaled: [0, 1e-3) and
[0, 1e3); mixed signs: (-1, 1)). The wide-range variant (mixed signs, magnitudes 1e-2..1e2 element by
element) reaches it.

problem: problems/gelu_rand.py
expect: mismatch
message: wrong on wide range inputs
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_sidestep(const float* x, float* y, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v < -1.5f ? 0.f : 0.5f * v * (1.f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="gelu_sidestep")
_lib.gelu_sidestep.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.gelu_sidestep.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_sidestep(ptr(x), ptr(y), x.numel())
        return y
