"""One timing slot per machine: timed phases of parallel jobs never overlap, and the verifier's
memory-heavy checks never run beside them.

On 2 shared cores the same kernel read 3.7x-12.9x while eval workers compiled, ran callgrind or
timed beside it. Whatever produces a number someone will compare (the verifier's interleaved
rounds, the profiler's timed region, baseline timings) holds this slot exclusively (``hold``).

The rest of a verification (its load and build, correctness trials, stress variants, the
held-out re-check) takes it shared (``share``): any number of jobs verify at once, but none while
another job times. Why: with one timing thread on 2 cores the other core is free, so a job
checking there streams its inputs and outputs (32 MB per call for ReLU) through the same memory as
the timed kernel, whatever its priority: beside a 2-worker ``pragma eval`` the same ReLU kernel
spread +-5.9% over 8 verifications with only the timed rounds locked, +-2.7% and +-2.0% (two runs)
with the whole verification sharing the slot (AVX2 EPYC, load 0.8-2.5; docs/verifier.md).
Sandboxed builds outside a verification (tuner and profiler prebuilds, a search round's compiles)
share it too (``verify._build``). LLM calls and profiler simulations stay parallel: they never wait.

The slot is an ``flock`` on a file shared by every PRAGMA process of the machine, whatever its
data dir (they share the CPU, not the data dir): the kernel releases it when the holder dies, so a
SIGKILLed job never blocks the next one. A second file, the turnstile, keeps a stream of
overlapping shared holders from starving a job that waits to time: a waiting exclusive holder
keeps the turnstile, and new shared holders pass through it first. Re-entrant within a thread (a
nested ``hold`` or ``share`` is free; ``hold`` inside ``share`` gives up the shared lock, waits
for the exclusive one, and takes the shared one back after).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypedDict

PATH_ENV = "PRAGMA_TIMING_SLOT_PATH"
DEFAULT_PATH = "/tmp/pragma-timing-slot.lock"
TURNSTILE_SUFFIX = ".turnstile"


class SlotUse(TypedDict):
    path: str  # the lock file
    waited_s: float  # seconds spent waiting for other holders (0.0 when free or nested)
    nested: bool  # this thread already held the slot (in this mode or exclusively)


class _Held(threading.local):
    fd: int = -1  # this thread's descriptor on the lock file (-1: none open, or it could not be opened)
    exclusive: int = 0  # depth of ``hold`` in this thread
    shared: int = 0  # depth of ``share`` in this thread


_held = _Held()


def path() -> str:
    return os.environ.get(PATH_ENV) or DEFAULT_PATH


def ensure_file(lock_path: str | None = None) -> str:
    """Create the lock file and its turnstile readable by everyone (a sandboxed process may only
    open them read-only; ``flock`` works on a read-only descriptor)."""
    p = lock_path or path()
    for name in (p, p + TURNSTILE_SUFFIX):
        try:
            os.close(os.open(name, os.O_CREAT | os.O_RDONLY, 0o644))
        except OSError:
            pass
    return p


def _open(name: str) -> int:
    """A read-only descriptor on ``name`` (created when allowed), -1 where it cannot be opened at all."""
    for flags in (os.O_RDONLY | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(name, flags, 0o644)
        except OSError:
            continue
    return -1


def _lock(fd: int, how: int) -> None:
    if fd >= 0:
        fcntl.flock(fd, how)


@contextmanager
def _turnstile(p: str) -> Iterator[None]:
    """Hold the turnstile for the body: writers keep it while they wait, readers pass through it."""
    fd = _open(p + TURNSTILE_SUFFIX)
    _lock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # closing the last descriptor releases the flock


def _release() -> None:
    if _held.fd >= 0:
        fcntl.flock(_held.fd, fcntl.LOCK_UN)
        os.close(_held.fd)
    _held.fd = -1


@contextmanager
def hold(purpose: str = "", lock_path: str | None = None) -> Iterator[SlotUse]:
    """Hold the machine's timing slot exclusively for the ``with`` body (blocks while another
    process times or checks).

    ``purpose`` names the holder in debug logs only.
    Where the lock file cannot be opened at all the body runs unlocked (``waited_s`` 0.0) rather
    than failing a verification: the slot improves precision, it is not a security layer.
    """
    p = lock_path or path()
    if _held.exclusive:
        _held.exclusive += 1
        try:
            yield SlotUse(path=p, waited_s=0.0, nested=True)
        finally:
            _held.exclusive -= 1
        return
    t0 = time.monotonic()
    if _held.shared:
        # Give the shared lock up first: a writer waiting in the turnstile may be waiting for it.
        _lock(_held.fd, fcntl.LOCK_UN)
    else:
        _held.fd = _open(p)
    with _turnstile(p):
        _lock(_held.fd, fcntl.LOCK_EX)
    waited_s = time.monotonic() - t0
    _held.exclusive = 1
    try:
        yield SlotUse(path=p, waited_s=round(waited_s, 4), nested=False)
    finally:
        _held.exclusive = 0
        if _held.shared:
            _lock(_held.fd, fcntl.LOCK_SH)  # back to checking beside other checkers
        else:
            _release()


@contextmanager
def share(purpose: str = "", lock_path: str | None = None) -> Iterator[SlotUse]:
    """Hold the slot shared for the ``with`` body: beside other shared holders, never beside a
    timed phase (waits for one that runs, and one that waits goes first)."""
    p = lock_path or path()
    if _held.shared or _held.exclusive:
        _held.shared += 1
        try:
            yield SlotUse(path=p, waited_s=0.0, nested=True)
        finally:
            _held.shared -= 1
        return
    t0 = time.monotonic()
    _held.fd = _open(p)
    with _turnstile(p):
        pass
    _lock(_held.fd, fcntl.LOCK_SH)
    waited_s = time.monotonic() - t0
    _held.shared = 1
    try:
        yield SlotUse(path=p, waited_s=round(waited_s, 4), nested=False)
    finally:
        _held.shared = 0
        if not _held.exclusive:
            _release()
