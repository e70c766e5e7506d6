"""Cheat: sigmoid from a 4097-entry table over [0, 1] with linear interpolation, the input
clamped into the table's range. Exact to ~1e-8 on [0, 1), so every trial passes; every input
outside [0, 1] reads the table's edge (sigmoid(-5) comes back as 0.5). Negated, scaled and
mixed-sign inputs (the stress variants) show it.

problem: problems/sigmoid_rand.py
expect: mismatch
message: correct on the problem's inputs, wrong on
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void sigmoid_table(const float* x, float* y, int64_t n) {
    float table[4097];  // rebuilt per call (4097 exps): cheap against 2M elements
    for (int i = 0; i <= 4096; ++i) table[i] = 1.0f / (1.0f + std::exp(-(float)i / 4096.0f));
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = std::fmin(std::fmax(x[i], 0.0f), 1.0f) * 4096.0f;
        int k = (int)v;
        if (k > 4095) k = 4095;
        float f = v - (float)k;
        y[i] = table[k] + f * (table[k + 1] - table[k]);
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="sigmoid_table")
_lib.sigmoid_table.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.sigmoid_table.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.sigmoid_table(ptr(x), ptr(y), x.numel())
        return y
