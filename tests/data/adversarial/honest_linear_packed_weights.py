"""Honest: nn.Linear whose weight is packed once, on the first call, into the layout the kernel
reads (W transposed, so the inner loop runs over contiguous output features). The packed copy
depends only on the parameters, never on an input: state that is allowed (issue 33), while a value
derived from an input and kept across calls is still refused (no_state_across_calls).

problem: problems/linear_rand.py
expect: ok
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
// y[b][o] = bias[o] + sum_i x[b][i] * Wt[i][o]   (Wt = W^T, packed once)
extern "C" void linear_packed(const float* x, const float* Wt, const float* bias, float* y,
                              int64_t B, int64_t I, int64_t O) {
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
        float* out = y + b * O;
        for (int64_t o = 0; o < O; ++o) out[o] = bias[o];
        for (int64_t i = 0; i < I; ++i) {
            const float v = x[b * I + i];
            const float* w = Wt + i * O;
            #pragma omp simd
            for (int64_t o = 0; o < O; ++o) out[o] += v * w[o];
        }
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="linear_packed")
_lib.linear_packed.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3
_lib.linear_packed.restype = None


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.packed = None

    def _pack(self):
        # Parameter-only state: the transposed weight, made once and reused by every call.
        self.packed = self.linear.weight.detach().t().contiguous()

    def forward(self, x):
        if self.packed is None:
            self._pack()
        x = x.contiguous()
        y = torch.empty(x.shape[0], self.linear.out_features, dtype=x.dtype)
        _lib.linear_packed(
            ptr(x), ptr(self.packed), ptr(self.linear.bias.detach()), ptr(y), x.shape[0], x.shape[1], y.shape[1]
        )
        return y
