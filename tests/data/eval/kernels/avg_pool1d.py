"""Fast-path kernel for eval/suites/cpu/avg_pool1d.py: window-4 stride-3 averages."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void avgpool(const float* x, float* y, int64_t planes, int64_t len, int64_t olen) {
    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t o = 0; o < olen; ++o) {
            const float* s = x + p * len + 3 * o;
            y[p * olen + o] = (s[0] + s[1] + s[2] + s[3]) * 0.25f;
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="avg_pool1d")
_lib.avgpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 3


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n, c, length = x.shape
        olen = (length - 4) // 3 + 1
        y = torch.empty(n, c, olen, dtype=x.dtype)
        _lib.avgpool(ptr(x), ptr(y), n * c, length, olen)
        return y
