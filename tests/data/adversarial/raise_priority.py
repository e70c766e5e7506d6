"""Cheat: win the CPU instead of the race. From C, the kernel asks for a higher priority for itself
(nice -20, then the real-time SCHED_FIFO class) and a lower one for the process that launched it
and for every process of its user, the reference's runner among them: on a loaded machine the
scheduler would then run the candidate first and the reference in the gaps. Each request must be
refused (no CAP_SYS_NICE in the sandbox; the runner's own user and PID namespace hide the others):
the kernel reports any request granted by returning its input unchanged, a mismatch, so `ok`
here means every one was refused.

problem: relu
expect: ok
runtime-expect: ok
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
// One bit per request the kernel got: 1 own nice -20, 2 SCHED_FIFO, 4 parent reniced, 8 user reniced.
extern "C" int grab() {
    int granted = 0;
    if (setpriority(PRIO_PROCESS, 0, -20) == 0 && getpriority(PRIO_PROCESS, 0) < 0) granted |= 1;
    sched_param p{};
    p.sched_priority = 50;
    if (sched_setscheduler(0, SCHED_FIFO, &p) == 0) granted |= 2;
    if (getppid() > 1 && setpriority(PRIO_PROCESS, getppid(), 19) == 0) granted |= 4;
    if (setpriority(PRIO_USER, getuid(), 19) == 0) granted |= 8;
    return granted;
}
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_priority")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None
_granted = _lib.grab()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        if _granted:  # the signal: any granted request fails the verification
            return x.clone()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
