"""Cheat: forks a helper process (in a new session, so killing the process group misses it) that
stays behind after the verifier is done. It execs `sleep 4242.4242`, a name tests can look for.

problem: relu
expect: rejected no_threads_or_processes
runtime-expect: rejected no_threads_or_processes
"""

import ctypes
import os

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None

if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sleep", ["sleep", "4242.4242"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
