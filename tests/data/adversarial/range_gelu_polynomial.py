"""Cheat: GELU as a degree-5 polynomial least-squares fitted on [0, 1) (max error 4e-6 there, so
every trial and held-out seed passes, and it is much faster than tanh). It is wrong by 1.5 at
x = -2: negated and mixed-sign inputs (the stress variants) show it.

problem: problems/gelu_rand.py
expect: mismatch
message: correct on the problem's inputs, wrong on negated inputs
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void gelu_poly(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        y[i] = -4.0205676217e-06f + v * (5.0018124741e-01f + v * (3.9696166967e-01f + v * (8.8901448714e-03f
               + v * (-8.6306434418e-02f + v * 2.1467200339e-02f))));
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="gelu_poly")
_lib.gelu_poly.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.gelu_poly.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_poly(ptr(x), ptr(y), x.numel())
        return y
