"""Fast-path kernel for eval/suites/cpu/conv2d_3x3.py: direct 3x3 convolution on a zero-padded copy, a register tile of output channels x columns (tunable)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <algorithm>
#include <cstdint>
#include <vector>
// The input is copied once into a zero-padded buffer whose rows are a whole number of PV-wide tiles
// (plus the two border columns), so every tile runs the same branch-free loop. A block of OB output
// channels x PV columns of one output row is accumulated in registers over every input channel and
// the 9 taps, and written once: each input load feeds OB FMAs.
constexpr int64_t OB = 1;   // tune: 1 2 4 8
constexpr int64_t PV = 16;  // tune: 16 32 64
extern "C" void conv3x3(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t ci,
                        int64_t co, int64_t h, int64_t wd) {
    const int64_t tiles = (wd + PV - 1) / PV, wp = tiles * PV + 2, hp = h + 2;
    std::vector<float> pad(n * ci * hp * wp, 0.0f);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t p = 0; p < n * ci; ++p)
        for (int64_t r = 0; r < h; ++r)
            std::copy(x + (p * h + r) * wd, x + (p * h + r + 1) * wd, pad.data() + (p * hp + r + 1) * wp + 1);
    const int64_t oblocks = (co + OB - 1) / OB;
    #pragma omp parallel for collapse(3) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t ob = 0; ob < oblocks; ++ob)
            for (int64_t r = 0; r < h; ++r) {
                const int64_t o0 = ob * OB, on = std::min(OB, co - o0);
                for (int64_t tt = 0; tt < tiles; ++tt) {
                    const int64_t c0 = tt * PV, pn = std::min(PV, wd - c0);
                    float acc[OB][PV];
                    for (int64_t q = 0; q < OB; ++q)
                        for (int64_t l = 0; l < PV; ++l) acc[q][l] = q < on ? b[o0 + q] : 0.0f;
                    // padded row r is input row r - 1: taps di = 0, 1, 2 read padded rows r, r+1, r+2
                    if (on == OB) {
                        for (int64_t c = 0; c < ci; ++c)
                            for (int64_t di = 0; di < 3; ++di)
                                for (int64_t dj = 0; dj < 3; ++dj) {
                                    const float* in = pad.data() + ((i * ci + c) * hp + r + di) * wp + c0 + dj;
                                    for (int64_t q = 0; q < OB; ++q) {
                                        const float kv = w[((o0 + q) * ci + c) * 9 + di * 3 + dj];
                                        #pragma omp simd
                                        for (int64_t l = 0; l < PV; ++l) acc[q][l] += kv * in[l];
                                    }
                                }
                    } else {
                        for (int64_t c = 0; c < ci; ++c)
                            for (int64_t di = 0; di < 3; ++di)
                                for (int64_t dj = 0; dj < 3; ++dj) {
                                    const float* in = pad.data() + ((i * ci + c) * hp + r + di) * wp + c0 + dj;
                                    for (int64_t q = 0; q < on; ++q) {
                                        const float kv = w[((o0 + q) * ci + c) * 9 + di * 3 + dj];
                                        for (int64_t l = 0; l < PV; ++l) acc[q][l] += kv * in[l];
                                    }
                                }
                    }
                    for (int64_t q = 0; q < on; ++q)
                        for (int64_t l = 0; l < pn; ++l) y[((i * co + o0 + q) * h + r) * wd + c0 + l] = acc[q][l];
                }
            }
}
"""

_lib = load_cpp(CPP_SOURCE, name="conv2d_3x3")
_lib.conv3x3.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 5


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, kernel_size=3, padding=1)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        n, ci, h, w = x.shape
        wt, b = self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()
        y = torch.empty(n, wt.shape[0], h, w, dtype=x.dtype)
        _lib.conv3x3(ptr(x), ptr(wt), ptr(b), ptr(y), n, ci, wt.shape[0], h, w)
        return y
