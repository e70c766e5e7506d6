"""A seccomp filter for runners: no ``flock`` for candidate code.

Why: every PRAGMA process of the machine coordinates through ``flock`` on files any process can
open read-only (the timing slot and its turnstile in /tmp, a data dir's run locks), and a runner
may read the whole filesystem (Landlock confines its writes only). A candidate that took the
timing slot at import (shared or exclusive) stalled its own verification until the run deadline
and, with its judge waiting in the turnstile for the exclusive lock, every other job's checks and
timings on the machine with it. With ``flock`` refused (EPERM) candidate code cannot hold or wait
for any of those locks. POSIX record locks (``fcntl``) are another lock family on Linux: they
never conflict with ``flock`` locks, so they stay allowed.

The filter also refuses every system call made through another ABI (x86-64's i386 ``int 0x80``
and x32 numbers), where ``flock`` has other numbers; runner code never uses those.
"""

from __future__ import annotations

import ctypes
import errno
import platform

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_X32_SYSCALL_BIT = 0x40000000
# (AUDIT_ARCH_* of the native ABI, __NR_flock) per machine
_ARCH = {"x86_64": (0xC000003E, 73), "aarch64": (0xC00000B7, 32)}

# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_OFFSET_NR = 0  # struct seccomp_data { int nr; __u32 arch; ... }
_OFFSET_ARCH = 4


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _program(arch: int, nr_flock: int) -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) rows; jumps count instructions after the next one."""
    deny = _SECCOMP_RET_ERRNO | errno.EPERM
    return [
        (_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        (_JEQ_K, 0, 3, arch),  # another ABI -> deny
        (_LD_W_ABS, 0, 0, _OFFSET_NR),
        (_JGE_K, 1, 0, _X32_SYSCALL_BIT),  # x32 numbers -> deny
        (_JEQ_K, 0, 1, nr_flock),  # flock -> deny, anything else -> allow
        (_RET_K, 0, 0, deny),
        (_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    ]


def deny_flock() -> str:
    """Install the filter on this (single-threaded, just forked) process and everything it starts.

    Returns what applied, for the isolation report; never raises (a kernel without seccomp leaves
    the runner as it was, and the report says so)."""
    spec = _ARCH.get(platform.machine())
    if spec is None:
        return f"none: no filter for {platform.machine()}"
    rows = _program(*spec)
    filters = (_SockFilter * len(rows))(*[_SockFilter(*row) for row in rows])
    prog = _SockFprog(len(rows), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"none: prctl(NO_NEW_PRIVS) failed ({errno.errorcode.get(ctypes.get_errno(), '?')})"
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"none: seccomp refused ({errno.errorcode.get(ctypes.get_errno(), '?')})"
    return "flock refused (seccomp filter)"
