"""Honest: MSE (mean reduction, one scalar) summed in double. Before the stress variants every
correct kernel for a scalar loss was rejected ("a constant output passes atol"); judged across
the trials and the scaled variants together, a correct kernel is ok.

problem: problems/mse_rand.py
expect: ok
stress-used: negated, scaled x1e-03, scaled x1e+03, mixed signs
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void mse(const float* p, const float* t, float* out, int64_t n) {
    double acc = 0.0;
    #pragma omp parallel for reduction(+:acc) schedule(static)
    for (int64_t i = 0; i < n; ++i) { double d = (double)p[i] - (double)t[i]; acc += d * d; }
    out[0] = (float)(acc / (double)n);
}
"""

_lib = load_cpp(CPP_SOURCE, name="mse")
_lib.mse.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64]
_lib.mse.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=p.dtype)
        _lib.mse(ptr(p), ptr(t), ptr(out), p.numel())
        return out
