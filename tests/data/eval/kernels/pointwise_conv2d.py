"""Fast-path kernel for eval/suites/cpu/pointwise_conv2d.py: 1x1 convolution as a register-tiled GEMM per image (tunable tile)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <algorithm>
#include <cstdint>
// Per image a GEMM: Y[o, p] = b[o] + sum_c W[o, c] X[c, p]. A block of OB output channels x PV pixels
// is accumulated in registers over every input channel and written once: each X load feeds OB FMAs.
constexpr int64_t OB = 1;   // tune: 1 2 4 6 8
constexpr int64_t PV = 16;  // tune: 16 32 48 64
extern "C" void pointwise(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t ci,
                          int64_t co, int64_t hw) {
    const int64_t oblocks = (co + OB - 1) / OB, ptiles = (hw + PV - 1) / PV;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t ob = 0; ob < oblocks; ++ob) {
            const int64_t o0 = ob * OB, on = std::min(OB, co - o0);
            const float* xi = x + i * ci * hw;
            float* yi = y + i * co * hw;
            for (int64_t pt = 0; pt < ptiles; ++pt) {
                const int64_t p0 = pt * PV, pn = std::min(PV, hw - p0);
                float acc[OB][PV];
                for (int64_t q = 0; q < OB; ++q)
                    for (int64_t l = 0; l < PV; ++l) acc[q][l] = q < on ? b[o0 + q] : 0.0f;
                if (on == OB && pn == PV) {
                    for (int64_t c = 0; c < ci; ++c) {
                        const float* s = xi + c * hw + p0;
                        for (int64_t q = 0; q < OB; ++q) {
                            const float wv = w[(o0 + q) * ci + c];
                            #pragma omp simd
                            for (int64_t l = 0; l < PV; ++l) acc[q][l] += wv * s[l];
                        }
                    }
                } else {
                    for (int64_t c = 0; c < ci; ++c) {
                        const float* s = xi + c * hw + p0;
                        for (int64_t q = 0; q < on; ++q) {
                            const float wv = w[(o0 + q) * ci + c];
                            for (int64_t l = 0; l < pn; ++l) acc[q][l] += wv * s[l];
                        }
                    }
                }
                for (int64_t q = 0; q < on; ++q)
                    for (int64_t l = 0; l < pn; ++l) yi[(o0 + q) * hw + p0 + l] = acc[q][l];
            }
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="pointwise_conv2d")
_lib.pointwise.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 96, kernel_size=1)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        n, ci, h, w = x.shape
        wt, b = self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()
        y = torch.empty(n, wt.shape[0], h, w, dtype=x.dtype)
        _lib.pointwise(ptr(x), ptr(wt), ptr(b), ptr(y), n, ci, wt.shape[0], h * w)
        return y
