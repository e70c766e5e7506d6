"""Seccomp filters for runners: no ``flock``, no say over anyone's scheduling, no new cgroup.

``flock`` (every runner of candidate or best code, and the profiler's worker). Every PRAGMA process
of the machine coordinates through ``flock`` on files any process can open read-only (the timing
slot and its turnstile in /tmp, a data dir's run locks), and a runner may read the whole filesystem
(Landlock confines its writes only). A candidate that took the timing slot at import (shared or
exclusive) stalled its own verification until the run deadline and, with its judge waiting in the
turnstile for the exclusive lock, every other job's checks and timings on the machine with it.
With ``flock`` refused (EPERM) candidate code cannot hold or wait for any of those locks. POSIX
record locks (``fcntl``) are another lock family on Linux: they never conflict with ``flock``
locks, so they stay allowed.

Fair neighbours (``confine_runner``: the candidate's and the best's runners, issue 33). Runners
share a uid and hold no capabilities, yet Linux lets a process lower the priority of, change the
policy of, or move any process of its own uid: a candidate's request to nice the reference's runner
to 19, to put it in SCHED_IDLE or to move it to another core was granted, and so was moving itself
(or a helper thread, or a child sharing its memory) to a core the judge had not pinned it to: a
second core for part of every call at num_threads=1. The filter refuses, with EPERM:
- ``sched_setaffinity`` always: the judge pins every runner to the same ``num_threads`` cores, and
  every thread or child the candidate makes inherits that set and can never leave it (so no share
  of any call runs on another core, whatever CPU accounting sees). libgomp calls it only where
  ``OMP_PROC_BIND``/``GOMP_CPU_AFFINITY`` ask for binding, which the sandbox's environment drops;
- ``setpriority``, ``sched_setscheduler``/``sched_setparam``/``sched_setattr`` and ``ioprio_set``
  aimed at anything but the calling thread (pid/who 0; ``PRIO_PGRP`` and ``PRIO_USER`` never):
  lowering one's own priority harms nobody else, raising it needs CAP_SYS_NICE, which runners lack;
- ``prlimit64`` that sets another process's limits, ``migrate_pages``/``move_pages`` of another
  process, and signals to another process (``kill`` to anything but itself or its own group,
  ``tkill``/``tgkill``/``rt_(tg)sigqueueinfo`` outside its own thread group, ``pidfd_open`` of another
  pid, ``pidfd_send_signal``): a SIGSTOP at the right moment is the crudest way to slow a neighbour
  (Landlock ABI 6 scopes signals too, where the kernel has it);
- ``ptrace`` and ``process_vm_readv``/``process_vm_writev``/``process_madvise``: no kernel needs
  them, and they stop, read or page out another process (Landlock denies them across domains too).
``clone3`` answers ENOSYS, so glibc falls back to ``clone`` (threads, ``posix_spawn``): its
``CLONE_INTO_CGROUP`` would start a child in another cgroup, i.e. under another cpuset, without
writing a cgroup file (those writes Landlock denies), and its flags sit behind a pointer no filter
can read. Process creation itself stays allowed: the candidate's own build runs the compiler in a
child (``pragma_cext``), and the judge counts a reaped child's CPU as the candidate's.
Cost: none measurable (about 30 BPF instructions on the syscalls above, ~50 on the rest).

Every filter also refuses every system call made through another ABI (x86-64's i386 ``int 0x80``
and x32 numbers), where these calls have other numbers; runner code never uses those.
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
_PRIO_PROCESS = 0
_IOPRIO_WHO_PROCESS = 1
# AUDIT_ARCH_* of the native ABI and the system call numbers the filters name, per machine
# (x86-64: asm/unistd_64.h; aarch64: asm-generic/unistd.h).
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR = {
    "x86_64": {
        "flock": 73, "sched_setaffinity": 203, "clone3": 435, "setpriority": 141, "sched_setscheduler": 144,
        "sched_setparam": 142, "sched_setattr": 314, "ioprio_set": 251, "prlimit64": 302, "migrate_pages": 256,
        "move_pages": 279, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "pidfd_open": 434, "pidfd_send_signal": 424, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440,
    },
    "aarch64": {
        "flock": 32, "sched_setaffinity": 122, "clone3": 435, "setpriority": 140, "sched_setscheduler": 119,
        "sched_setparam": 118, "sched_setattr": 274, "ioprio_set": 30, "prlimit64": 261, "migrate_pages": 238,
        "move_pages": 239, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240, "pidfd_open": 434, "pidfd_send_signal": 424, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "process_madvise": 440,
    },
}  # fmt: skip

# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JA = 0x05
_RET_K = 0x06
_OFFSET_NR = 0  # struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
_OFFSET_ARCH = 4


def _arg_low(i: int) -> int:
    """Offset of the low 32 bits of argument ``i`` (little-endian). The kernel reads pid, which
    and who arguments as 32-bit ints, so their low half is what it acts on, whatever the high half."""
    return 16 + 8 * i


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


Row = tuple  # (code, jt, jf, k), where jt/jf/k may name a label (str) until assembled


def _assemble(rows: list[Row | str]) -> list[tuple[int, int, int, int]]:
    """Resolve labels (strings in the list mark positions; a string jt/jf is a conditional jump's
    target, a string k an unconditional jump's). BPF jumps count instructions after the next one."""
    at: dict[str, int] = {}
    code: list[Row] = []
    for r in rows:
        if isinstance(r, str):
            at[r] = len(code)
        else:
            code.append(r)
    out = []
    for i, (op, jt, jf, k) in enumerate(code):
        if isinstance(jt, str):
            jt = at[jt] - i - 1
        if isinstance(jf, str):
            jf = at[jf] - i - 1
        if op == _JA and isinstance(k, str):
            k = at[k] - i - 1
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError("seccomp program: a jump is out of range")
        out.append((op, jt, jf, k))
    return out


def _prologue(arch: int) -> list[Row | str]:
    return [
        (_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        (_JEQ_K, 0, "deny", arch),  # another ABI -> deny
        (_LD_W_ABS, 0, 0, _OFFSET_NR),
        (_JGE_K, "deny", 0, _X32_SYSCALL_BIT),  # x32 numbers -> deny
    ]


_EPILOGUE: list[Row | str] = [
    "allow",
    (_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    "deny",
    (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EPERM),
    "enosys",
    (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS),
]


def _program(arch: int, nr_flock: int) -> list[tuple[int, int, int, int]]:
    """``flock`` refused, anything else allowed: (code, jt, jf, k) rows."""
    return _assemble([*_prologue(arch), (_JEQ_K, "deny", "allow", nr_flock), *_EPILOGUE])


def runner_program(arch: int, nr: dict[str, int], own_pid: int) -> list[tuple[int, int, int, int]]:
    """The candidate's and the best's filter (see the module docstring): ``flock``, scheduling of
    anything but the calling thread, affinity, signals and memory of other processes refused;
    ``clone3`` ENOSYS. ``own_pid`` is the runner's (its threads share it as their thread group)."""
    own = own_pid & 0xFFFFFFFF
    own_group = -own_pid & 0xFFFFFFFF  # kill(-pgid): the runner leads its own process group
    dispatch: list[tuple[str, str]] = [
        ("flock", "deny"),
        ("sched_setaffinity", "deny"),
        ("pidfd_send_signal", "deny"),
        ("ptrace", "deny"),
        ("process_vm_readv", "deny"),
        ("process_vm_writev", "deny"),
        ("process_madvise", "deny"),
        ("clone3", "enosys"),
        ("setpriority", "setpriority"),
        ("sched_setscheduler", "arg0_zero"),
        ("sched_setparam", "arg0_zero"),
        ("sched_setattr", "arg0_zero"),
        ("ioprio_set", "ioprio"),
        ("prlimit64", "prlimit"),
        ("migrate_pages", "arg0_self"),
        ("move_pages", "arg0_self"),
        ("kill", "kill"),
        ("tkill", "arg0_own"),
        ("tgkill", "arg0_own"),
        ("rt_sigqueueinfo", "arg0_own"),
        ("rt_tgsigqueueinfo", "arg0_own"),
        ("pidfd_open", "arg0_own"),
    ]
    rows: list[Row | str] = _prologue(arch)  # jumps go forward only: a target follows its jumps
    rows += [(_JEQ_K, target, 0, nr[name]) for name, target in dispatch]
    rows += [(_RET_K, 0, 0, _SECCOMP_RET_ALLOW)]
    rows += [
        # ioprio_set(which, who, ioprio): IOPRIO_WHO_PROCESS of the calling thread only
        "ioprio",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "arg1_zero", "deny", _IOPRIO_WHO_PROCESS),
        # setpriority(which, who, prio): PRIO_PROCESS of the calling thread only
        "setpriority",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, 0, "deny", _PRIO_PROCESS),
        "arg1_zero",
        (_LD_W_ABS, 0, 0, _arg_low(1)),
        (_JEQ_K, "allow", "deny", 0),
        # sched_set*(pid, ...): the calling thread only
        "arg0_zero",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow", "deny", 0),
        # prlimit64(pid, resource, new, old): reading anyone's limits, setting its own
        "prlimit",
        (_LD_W_ABS, 0, 0, _arg_low(2)),
        (_JEQ_K, 0, "arg0_self", 0),
        (_LD_W_ABS, 0, 0, _arg_low(2) + 4),
        (_JEQ_K, "allow", "arg0_self", 0),
        # pid 0 or its own pid
        "arg0_self",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow", 0, 0),
        (_JEQ_K, "allow", "deny", own),
        # kill(pid, sig): itself, its own group (0 or -pid)
        "kill",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow", 0, 0),
        (_JEQ_K, "allow", 0, own_group),
        (_JEQ_K, "allow", "deny", own),
        # tkill(tid), tgkill(tgid, ...), rt_(tg)sigqueueinfo(tgid, ...), pidfd_open(pid): its own process
        "arg0_own",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow", "deny", own),
    ]
    return _assemble(rows + _EPILOGUE)


def _install(rows: list[tuple[int, int, int, int]]) -> str:
    """Install ``rows`` on this process (and everything it starts); '' or why it did not apply."""
    filters = (_SockFilter * len(rows))(*[_SockFilter(*row) for row in rows])
    prog = _SockFprog(len(rows), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"none: prctl(NO_NEW_PRIVS) failed ({errno.errorcode.get(ctypes.get_errno(), '?')})"
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"none: seccomp refused ({errno.errorcode.get(ctypes.get_errno(), '?')})"
    return ""


def deny_flock() -> str:
    """Install the flock filter on this (single-threaded, just forked) process and everything it starts.

    Returns what applied, for the isolation report; never raises (a kernel without seccomp leaves
    the process as it was, and the report says so)."""
    machine = platform.machine()
    if machine not in _ARCH:
        return f"none: no filter for {machine}"
    return _install(_program(_ARCH[machine], _NR[machine]["flock"])) or "flock refused (seccomp filter)"


def confine_runner() -> str:
    """Install the runner filter (``runner_program``) on this just forked, single-threaded runner.

    Returns what applied; never raises."""
    import os

    machine = platform.machine()
    if machine not in _ARCH:
        return f"none: no filter for {machine}"
    why = _install(runner_program(_ARCH[machine], _NR[machine], os.getpid()))
    return why or (
        "flock refused; scheduling, signals and memory of other processes refused; affinity fixed (seccomp filter)"
    )
