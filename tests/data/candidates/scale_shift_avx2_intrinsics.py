"""Profiler fixture for tests/data/problems/scale_shift.py: hand-written AVX2 + FMA intrinsics (_mm256_fmadd_ps),
the kind of kernel strong models write (valgrind cannot execute AVX-512 ones)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <immintrin.h>
extern "C" void scale_shift(const float* __restrict x, float* __restrict y, int64_t n) {
    const __m256 a = _mm256_set1_ps(2.5f), b = _mm256_set1_ps(0.5f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), a, b));
    for (; i < n; ++i) y[i] = __builtin_fmaf(x[i], 2.5f, 0.5f);
}
"""

_lib = load_cpp(CPP_SOURCE, name="scale_shift_avx2_intrinsics")
_lib.scale_shift.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.scale_shift.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_shift(ptr(x), ptr(y), x.numel())
        return y
