"""Fast-path kernel for eval/suites/cpu/cosine_similarity_rows.py: dot product and both norms in one pass per row pair."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void cos_rows(const float* a, const float* b, float* y, int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* ar = a + r * cols;
        const float* br = b + r * cols;
        double d = 0.0, na = 0.0, nb = 0.0;
        #pragma omp simd reduction(+:d, na, nb)
        for (int64_t c = 0; c < cols; ++c) {
            d += (double)ar[c] * br[c]; na += (double)ar[c] * ar[c]; nb += (double)br[c] * br[c];
        }
        y[r] = (float)(d / std::sqrt(std::fmax(na * nb, eps * eps)));
    }
}
"""

_lib = load_cpp(CPP_SOURCE, name="cosine_similarity_rows")
_lib.cos_rows.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_double]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty(a.shape[0], dtype=a.dtype)
        _lib.cos_rows(ptr(a), ptr(b), ptr(y), a.shape[0], a.shape[1], 1e-8)
        return y
