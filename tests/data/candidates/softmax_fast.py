"""Honest fast-path candidate for eval/suites/examples/softmax.py: stable row softmax in C++."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

# A hand-written exp instead of -ffast-math: with GCC 12, -ffast-math links crtfastmath.o even
# into a shared object, which turns on flush-to-zero for the whole process (the reference too).
# Plain expf is a libm call the compiler will not vectorize without -ffast-math.
CPP_SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <cmath>  // INFINITY

// exp(x) for x <= 0 (inputs are x - rowmax): 2^n * e^r, |r| <= ln2/2, degree-7 Taylor (~1 ulp).
// Written without floor()/fmax(): GCC will not vectorize those calls without -ffast-math.
static inline float exp_nonpos(float x) {
    x = x < -87.0f ? -87.0f : x;  // below this e^x is denormal; clamp keeps 2^n a normal float
    const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
    const float n = (x * 1.44269504f + shifter) - shifter;
    float r = x - n * 0.693145752f - n * 1.42860677e-6f;  // ln2 split in two: exact n*hi
    float p = 1.f + r * (1.f + r * (0.5f + r * (1.f / 6 + r * (1.f / 24 + r * (1.f / 120
              + r * (1.f / 720 + r * (1.f / 5040)))))));
    int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

extern "C" void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        #pragma omp simd reduction(max:m)
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) { float e = exp_nonpos(xr[c] - m); yr[c] = e; s += e; }
        const float inv = 1.f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="softmax")
_lib.softmax_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
_lib.softmax_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # Softmax over dim=1 of a 2-D input, as in the problem.
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.softmax_forward(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
