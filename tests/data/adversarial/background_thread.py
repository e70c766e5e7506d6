"""Cheat: returns an empty output at once and computes it on a Python thread after forward has
returned, outside the timed region.

problem: relu
expect: rejected no_threads_or_processes
runtime-expect: rejected output_stable
timing: the output_stable check re-reads the output after the call; on a loaded machine the thread may not have written it yet, and the answer becomes a mismatch
"""

import ctypes
import threading

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <ctime>
extern "C" void relu_slowly(const float* x, float* y, int64_t n) {
    timespec pause{0, 2000000};  // 2 ms: make sure the caller is gone before the answer exists
    nanosleep(&pause, nullptr);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu_slowly")
_lib.relu_slowly.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_slowly.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.zeros_like(x)
        threading.Thread(target=_lib.relu_slowly, args=(ptr(x), ptr(y), x.numel()), daemon=True).start()
        return y
