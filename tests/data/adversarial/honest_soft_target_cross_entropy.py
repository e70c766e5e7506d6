"""Honest: soft-target cross-entropy computed as mean over rows of logsumexp(p) - sum(t * p), which
uses that every target row sums to 1, as the problem states. The stress variants and the stateless
probe must keep that structure: before issue 33 the structure was classified on inputs the probe had
already edited (a few values moved between rows), so the target rows were scaled like plain tensors.

problem: problems/soft_target_cross_entropy.py
expect: ok
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void soft_ce(const float* p, const float* t, float* out, int64_t rows, int64_t n) {
    double total = 0.0;
    #pragma omp parallel for reduction(+:total) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* pr = p + r * n;
        const float* tr = t + r * n;
        float m = pr[0];
        for (int64_t j = 1; j < n; ++j) m = pr[j] > m ? pr[j] : m;
        double s = 0.0, dot = 0.0;
        for (int64_t j = 0; j < n; ++j) {
            s += std::exp((double)(pr[j] - m));
            dot += (double)tr[j] * pr[j];
        }
        total += (double)m + std::log(s) - dot;  // sum_j t_j = 1: no normalisation of the targets
    }
    out[0] = (float)(total / rows);
}
"""

_lib = load_cpp(CPP_SOURCE, name="soft_ce")
_lib.soft_ce.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2
_lib.soft_ce.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=p.dtype)
        _lib.soft_ce(ptr(p), ptr(t), ptr(out), p.shape[0], p.shape[1])
        return out
