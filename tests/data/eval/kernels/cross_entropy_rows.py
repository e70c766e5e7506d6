"""Fast-path kernel for eval/suites/cpu/cross_entropy_rows.py: per-sample cross-entropy: logsumexp(logits) - logits[label]."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <limits>
extern "C" void xent(const float* x, const int64_t* labels, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -std::numeric_limits<float>::infinity();
        #pragma omp simd reduction(max:m)
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += std::exp((double)(xr[c] - m));
        y[r] = (float)(m + std::log(s) - xr[labels[r]]);
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="cross_entropy_rows")
_lib.xent.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, labels):
        logits, labels = logits.contiguous(), labels.contiguous()
        y = torch.empty(logits.shape[0], dtype=logits.dtype)
        _lib.xent(ptr(logits), ptr(labels), ptr(y), logits.shape[0], logits.shape[1])
        return y
