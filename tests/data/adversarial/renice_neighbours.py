"""Cheat (issue 33, "neighbours made slow"): runners share a uid and, without capabilities, may
still lower the priority of, or move, any process of that uid. From C, at import, the kernel asks
for every other process it can see (the reference's runner, the judge, the best's runner) to be
reniced to 19, put in SCHED_IDLE, moved to another core and given the idle I/O class, and for its
whole user to be reniced (PRIO_USER). Before the fix the kernel granted the runner requests (nice,
policy and affinity of the reference's runner): the reference would then be timed in the gaps
other work leaves. Every request must be refused (the candidate's seccomp filter allows scheduling
calls on the calling thread only, and affinity changes never). The kernel reports any request
granted by returning its input unchanged, a mismatch, so `ok` means every one was refused.

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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
// How many requests aimed at another process (or at the whole user) the kernel granted.
extern "C" int slow_neighbours() {
    int granted = 0;
    const pid_t me = getpid();
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    DIR* d = opendir("/proc");
    if (d == nullptr) return 0;
    while (struct dirent* e = readdir(d)) {
        const pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 1 || pid == me) continue;
        if (setpriority(PRIO_PROCESS, pid, 19) == 0) ++granted;
        sched_param p{};
        if (sched_setscheduler(pid, SCHED_IDLE, &p) == 0) ++granted;
        cpu_set_t cs;
        CPU_ZERO(&cs);
        CPU_SET(ncpu - 1, &cs);
        if (sched_setaffinity(pid, sizeof cs, &cs) == 0) ++granted;
        // ioprio_set(IOPRIO_WHO_PROCESS, pid, IOPRIO_CLASS_IDLE << 13)
        if (syscall(SYS_ioprio_set, 1, pid, 3 << 13) == 0) ++granted;
    }
    closedir(d);
    if (setpriority(PRIO_USER, 0, 19) == 0) ++granted;
    return granted;
}
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_slow_neighbours")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None
_granted = _lib.slow_neighbours()


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
