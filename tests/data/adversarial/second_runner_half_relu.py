"""Cheat (issue 33, the two sets of timed runners): an honest ReLU everywhere but in the candidate's
second timed runner, which only ever runs warm-up and timed calls (never a correctness trial or the
held-out check) and there writes only the first half of its output. It knows where it runs from its
module's name (the judge loads that runner as ``pragma_candidate_b``). Every timed call of both
runners is spot-read by the judge when it returns, and audited rounds audit either runner, drawn in
secret: the first round it times fails.

problem: relu
expect: rejected audited_calls
runtime-expect: rejected audited_calls
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_second_runner")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None

_ONLY_TIMED = __name__.endswith("_b")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel() // 2 if _ONLY_TIMED else x.numel()
        _lib.relu_forward(ptr(x), ptr(y), n)
        return y
