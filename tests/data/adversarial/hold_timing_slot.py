"""Cheat: hold the machine's timing slot. Every PRAGMA process coordinates through an flock on a
file anyone may open read-only (/tmp/pragma-timing-slot.lock, or $PRAGMA_TIMING_SLOT_PATH, and
its turnstile). At import the kernel takes both without waiting: a shared lock on the slot keeps
its own judge (and, while that judge waits in the turnstile, every other job's checks and
timings on the machine) waiting until the run deadline; the turnstile held stalls every job
outright. Each request must be refused (runners have no flock: seccomp); the kernel answers wrong
when any was granted, so `ok` here means every one was refused, and the verification did not
hang. The static layer stops it at its C `open(`; with the static layer off it runs.

problem: relu
expect: rejected no_filesystem_writes
runtime-expect: ok
"""

import ctypes
import os

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
// One bit per lock the kernel got: 1 the slot shared, 2 the slot exclusive, 4 the turnstile.
extern "C" int grab(const char* slot, const char* turnstile) {
    int got = 0;
    int fd = open(slot, O_RDONLY);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0) got |= 1;
    int fd2 = open(slot, O_RDONLY);
    if (fd2 >= 0 && flock(fd2, LOCK_EX | LOCK_NB) == 0) got |= 2;
    int fd3 = open(turnstile, O_RDONLY);
    if (fd3 >= 0 && flock(fd3, LOCK_EX | LOCK_NB) == 0) got |= 4;
    return got;  // the descriptors stay open: a granted lock is held for the process's life
}
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_hold_slot")
_lib.grab.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None
_SLOT = os.environ.get("PRAGMA_TIMING_SLOT_PATH") or "/tmp/pragma-timing-slot.lock"
_granted = _lib.grab(_SLOT.encode(), (_SLOT + ".turnstile").encode())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        if _granted:  # the signal: any granted lock fails the verification
            return x.clone()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
