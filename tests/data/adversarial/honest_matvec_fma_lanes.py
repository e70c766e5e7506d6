"""Honest: y = A @ x with 16 float accumulators per row (what g++ turns into one AVX-512 register
of FMAs, or two AVX2 ones), summed at the end: the standard fp32 kernel, in another summation order
than torch's. On the mixed-signs variant its outputs cancel to ~1% of what was summed, where its
rounding and the fp32 reference's differ by more than a tolerance scaled with the output's peak
(issue 33: 3 of 256 outputs refused). Judged against a float64 reference with a bound that grows
with the magnitudes summed, it must stay ok.

problem: problems/matvec_rand.py
expect: ok
stress-used: negated, scaled x1e-03, scaled x1e+03, mixed signs, wide range
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void matvec_lanes(const float* A, const float* x, float* y, int64_t M, int64_t K) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        const float* a = A + i * K;
        float acc[16] = {0.f};
        int64_t k = 0;
        for (; k + 16 <= K; k += 16)
            for (int l = 0; l < 16; ++l) acc[l] += a[k + l] * x[k + l];
        float s = 0.f;
        for (; k < K; ++k) s += a[k] * x[k];
        for (int l = 0; l < 16; ++l) s += acc[l];
        y[i] = s;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="matvec_lanes")
_lib.matvec_lanes.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2
_lib.matvec_lanes.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        y = torch.empty(A.shape[0], 1, dtype=A.dtype)
        _lib.matvec_lanes(ptr(A), ptr(B), ptr(y), A.shape[0], A.shape[1])
        return y
