"""Fast-path kernel for eval/suites/cpu/conv1d.py: direct 1-D convolution, kernel 5, vectorized over output positions."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void conv1d(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t ci,
                       int64_t co, int64_t len, int64_t k) {
    const int64_t olen = len - k + 1;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < co; ++o) {
            float* dst = y + (i * co + o) * olen;
            for (int64_t t = 0; t < olen; ++t) dst[t] = b[o];
            for (int64_t c = 0; c < ci; ++c) {
                const float* src = x + (i * ci + c) * len;
                for (int64_t j = 0; j < k; ++j) {
                    const float kv = w[(o * ci + c) * k + j];
                    #pragma omp simd
                    for (int64_t t = 0; t < olen; ++t) dst[t] += kv * src[t + j];
                }
            }
        }
}
"""

_lib = load_cpp(CPP_SOURCE, name="conv1d")
_lib.conv1d.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 5


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(32, 64, kernel_size=5)  # seeded like the reference's

    def forward(self, x):
        x = x.contiguous()
        n, ci, length = x.shape
        wt, b = self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()
        co, k = wt.shape[0], wt.shape[2]
        y = torch.empty(n, co, length - k + 1, dtype=x.dtype)
        _lib.conv1d(ptr(x), ptr(wt), ptr(b), ptr(y), n, ci, co, length, k)
        return y
