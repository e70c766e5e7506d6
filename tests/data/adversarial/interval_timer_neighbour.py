"""Cheat (issue 19): a noisy neighbour from inside. An interval timer whose C signal handler burns
2 ms of CPU every 5 ms, installed from C (no Python-level name a source scan sees). In v1 it slowed
the reference, timed in the same process, and a ReLU read 2.5-2.7x against its twin's 1.0x. Now
the reference runs in another process while the candidate's is stopped: the handler can only slow
the candidate itself, so the speedup must stay within 1.3x of the twin's.

problem: relu
twin: candidates/relu_fast.py
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <csignal>
#include <ctime>
#include <sys/time.h>
// Every 5 ms of wall time (ITIMER_REAL keeps counting while the process is stopped) a signal
// handler burns 2 ms of CPU: in v1 it ran while the reference was timed in the same process.
static void burn(int) {
    timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { clock_gettime(CLOCK_MONOTONIC, &t); } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 2000000L);
}
extern "C" void arm() {
    std::signal(SIGALRM, burn);
    itimerval v{{0, 5000}, {0, 5000}};
    setitimer(ITIMER_REAL, &v, nullptr);
}
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_timer")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None
_lib.arm()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
