"""Cheat (issue 19): a noisy neighbour thread started from C (pthread_create, invisible to Python)
that streams memory forever. In v1 it inflated the reference's time 1.44x. Now it is an OS
thread beyond the OpenMP allowance (thread_budget, read from /proc) and it is stopped with the
candidate's process while the reference is timed: non-ok, or within 1.3x of the twin's speedup.

problem: relu
twin: candidates/relu_fast.py
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <pthread.h>
// A thread started from C that streams 64 MiB of memory forever: between the candidate's own
// calls it competes with whatever else runs for the memory bus (in v1: the reference's timing).
static void* stream(void*) {
    static char buf[64 << 20];
    for (unsigned v = 0;; ++v) std::memset(buf, v & 0xff, sizeof buf);
    return nullptr;
}
extern "C" void start_neighbour() {
    pthread_t t;
    pthread_create(&t, nullptr, stream, nullptr);
    pthread_detach(t);
}
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_thread")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None
_lib.start_neighbour()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
