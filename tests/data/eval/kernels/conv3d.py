"""Fast-path kernel for eval/suites/cpu/conv3d.py: direct 3x3x3 convolution, a register tile of output channels x row columns (tunable)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <algorithm>
#include <cstdint>
#include <vector>
// The input is copied once into a buffer whose rows are a whole number of PV-wide tiles plus the two
// columns the taps reach past them (zeros), so every tile runs the same branch-free loop (a partial
// tile's extra columns are computed and not stored). A block of OB output channels x PV columns of
// one output row is accumulated in registers over every input channel and the 27 taps, and written
// once: each input load feeds OB FMAs.
constexpr int64_t OB = 1;   // tune: 1 2 4 8
constexpr int64_t PV = 16;  // tune: 16 32
extern "C" void conv3d(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t ci,
                       int64_t co, int64_t d, int64_t h, int64_t wd) {
    const int64_t od = d - 2, oh = h - 2, ow = wd - 2;
    const int64_t tiles = (ow + PV - 1) / PV, wp = tiles * PV + 2;
    std::vector<float> pad(n * ci * d * h * wp, 0.0f);
    #pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < n * ci * d * h; ++row)
        std::copy(x + row * wd, x + (row + 1) * wd, pad.data() + row * wp);
    const int64_t oblocks = (co + OB - 1) / OB;
    #pragma omp parallel for collapse(3) schedule(static)
    for (int64_t s = 0; s < n; ++s)
        for (int64_t ob = 0; ob < oblocks; ++ob)
            for (int64_t z = 0; z < od; ++z) {
                const int64_t o0 = ob * OB, on = std::min(OB, co - o0);
                for (int64_t r = 0; r < oh; ++r)
                    for (int64_t tt = 0; tt < tiles; ++tt) {
                        const int64_t c0 = tt * PV, pn = std::min(PV, ow - c0);
                        float acc[OB][PV];
                        for (int64_t q = 0; q < OB; ++q)
                            for (int64_t l = 0; l < PV; ++l) acc[q][l] = q < on ? b[o0 + q] : 0.0f;
                        if (on == OB) {
                            for (int64_t c = 0; c < ci; ++c)
                                for (int64_t a = 0; a < 3; ++a)
                                    for (int64_t e = 0; e < 3; ++e) {
                                        const float* in = pad.data() + (((s * ci + c) * d + z + a) * h + r + e) * wp + c0;
                                        for (int64_t f = 0; f < 3; ++f)
                                            for (int64_t q = 0; q < OB; ++q) {
                                                const float kv = w[((o0 + q) * ci + c) * 27 + (a * 3 + e) * 3 + f];
                                                #pragma omp simd
                                                for (int64_t l = 0; l < PV; ++l) acc[q][l] += kv * in[l + f];
                                            }
                                    }
                        } else {
                            for (int64_t c = 0; c < ci; ++c)
                                for (int64_t a = 0; a < 3; ++a)
                                    for (int64_t e = 0; e < 3; ++e) {
                                        const float* in = pad.data() + (((s * ci + c) * d + z + a) * h + r + e) * wp + c0;
                                        for (int64_t f = 0; f < 3; ++f)
                                            for (int64_t q = 0; q < on; ++q) {
                                                const float kv = w[((o0 + q) * ci + c) * 27 + (a * 3 + e) * 3 + f];
                                                for (int64_t l = 0; l < PV; ++l) acc[q][l] += kv * in[l + f];
                                            }
                                    }
                        }
                        for (int64_t q = 0; q < on; ++q)
                            for (int64_t l = 0; l < pn; ++l)
                                y[(((s * co + o0 + q) * od + z) * oh + r) * ow + c0 + l] = acc[q][l];
                    }
            }
}
"""

_lib = load_cpp(CPP_SOURCE, name="conv3d")
_lib.conv3d.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 6


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(8, 16, kernel_size=3)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        n, ci, d, h, w = x.shape
        wt, b = self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()
        co = wt.shape[0]
        y = torch.empty(n, co, d - 2, h - 2, w - 2, dtype=x.dtype)
        _lib.conv3d(ptr(x), ptr(wt), ptr(b), ptr(y), n, ci, co, d, h, w)
        return y
