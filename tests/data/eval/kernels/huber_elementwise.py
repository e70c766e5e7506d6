"""Fast-path kernel for eval/suites/cpu/huber_elementwise.py: elementwise smooth L1 (beta = 1)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void huber(const float* p, const float* t, float* y, int64_t n, float beta) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float d = p[i] - t[i];
        const float a = std::fabs(d);
        y[i] = a < beta ? 0.5f * d * d / beta : a - 0.5f * beta;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="huber")
_lib.huber.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_float]
_lib.huber.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred, target):
        pred, target = pred.contiguous(), target.contiguous()
        y = torch.empty_like(pred)
        _lib.huber(ptr(pred), ptr(target), ptr(y), pred.numel(), 1.0)
        return y
