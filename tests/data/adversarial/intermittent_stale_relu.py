"""Cheat (issue 33): an honest ReLU that tells timed calls from checked ones and, on one timed call
in four, returns its previous output instead of computing (a stale buffer, as a race would leave).
It tells them apart by what its process sees: the judge continues it (SIGCONT, which a handler
notices) before every timed call, and the runner's own frame holds the call's flags (`check` is
false for a timed call). Checked calls, held-out one included, are always right. With a few
audited rounds it passed 2 of 24 runs; every timed call is now spot-checked by the judge, on
inputs whose every element is new, so the first stale call fails.

problem: relu
expect: rejected no_introspection
runtime-expect: rejected audited_calls
"""

import ctypes
import signal
import sys

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

_lib = load_cpp(CPP_SOURCE, name="relu_intermittent")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None

_continued = [False]


def _on_cont(signum, frame):
    _continued[0] = True


signal.signal(signal.SIGCONT, _on_cont)


def _checked() -> bool:
    """Whether the runner's call that is running this forward keeps and checks the output."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "op_call":
            return bool(frame.f_locals.get("check"))
        frame = frame.f_back
    return True


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.previous = None
        self.timed = 0

    def forward(self, x):
        timed, _continued[0] = _continued[0] and not _checked(), False
        if timed and self.previous is not None:
            self.timed += 1
            if self.timed % 4 == 0:
                return self.previous  # stale: the last call's answer
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        self.previous = y
        return y
