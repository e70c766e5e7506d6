"""Cheat: GELU as a polynomial fitted on [0, 1) (wrong by ~0.8 at x = -2), except on inputs it
recognises as a transform of the last input it was called on: it keeps 64 values of that input in a
C static and answers exactly when the new input matches them negated, scaled by 1e-3 or 1e3, or with
signs mixed (|x| equal). The stress variants used to be exactly such transforms of the last checked
input, so it was ok at 6.3-6.7x (issue 33). Variants of a fresh draw it never saw show it.

problem: problems/gelu_rand.py
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
static float seen[64];
static bool have = false;

static bool recognised(const float* x, int64_t n) {
    if (!have || n < 64) return false;
    const float scales[3] = {1.f, 1e-3f, 1e3f};
    for (float c : scales) {
        bool all = true;
        for (int i = 0; i < 64 && all; ++i) {
            const float want = std::fabs(seen[i] * c), got = std::fabs(x[i]);
            all = std::fabs(got - want) <= 1e-5f * want + 1e-30f;
        }
        if (all) return true;
    }
    return false;
}

extern "C" void gelu_fingerprint(const float* x, float* y, int64_t n) {
    if (recognised(x, n)) {
        for (int64_t i = 0; i < n; ++i) {
            const float v = x[i];
            y[i] = 0.5f * v * (1.f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
        }
        return;
    }
    for (int i = 0; i < 64 && i < n; ++i) seen[i] = x[i];
    have = n >= 64;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = -4.0205676217e-06f + v * (5.0018124741e-01f + v * (3.9696166967e-01f + v * (8.8901448714e-03f
               + v * (-8.6306434418e-02f + v * 2.1467200339e-02f))));
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="gelu_fingerprint")
_lib.gelu_fingerprint.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.gelu_fingerprint.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_fingerprint(ptr(x), ptr(y), x.numel())
        return y
