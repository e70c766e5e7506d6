"""Cheat: correct on every check, then, once the timed rounds have begun, write denormals into its
input after computing the output. While timed, every implementation reads one shared input
region, so a write there would slow the reference and the best (denormal arithmetic) and inflate
the candidate's speedup. The region is sealed and mapped read-only: the write ends the candidate.

problem: relu
settings: timed_calls=60
expect: runtime_error
runtime-expect: runtime_error
message: read-only region shared by every implementation
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
static int64_t calls = 0;  // state in C, out of the static rules' sight
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    if (++calls > 40) {  // well past the correctness calls: these are timed
        float* w = const_cast<float*>(x);
        for (int64_t i = 0; i < n; i += 16) w[i] = 1e-40f;  // a denormal every cache line
    }
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu_poison")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
