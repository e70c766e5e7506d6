"""One timing slot per machine: timed phases of parallel jobs never overlap.

On 2 shared cores the same kernel read 3.7x-12.9x while eval workers compiled, ran callgrind or
timed beside it. Whatever produces a number someone will compare (the verifier's interleaved
rounds, the profiler's timed region, baseline timings) holds this slot; compiles, LLM calls and
simulations stay parallel.

The slot is an ``flock`` on a file shared by every PRAGMA process of the machine, whatever its
data dir (they share the CPU, not the data dir): the kernel releases it when the holder dies, so a
SIGKILLed job never blocks the next one. Re-entrant within a process (a nested ``hold`` is free).
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


class SlotUse(TypedDict):
    path: str  # the lock file
    waited_s: float  # seconds spent waiting for another holder (0.0 when free or nested)
    nested: bool  # this process already held the slot


_local = threading.local()


def path() -> str:
    return os.environ.get(PATH_ENV) or DEFAULT_PATH


def ensure_file(lock_path: str | None = None) -> str:
    """Create the lock file readable by everyone (a sandboxed process may only open it read-only)."""
    p = lock_path or path()
    try:
        fd = os.open(p, os.O_CREAT | os.O_RDONLY, 0o644)
        os.close(fd)
    except OSError:
        pass
    return p


@contextmanager
def hold(purpose: str = "", lock_path: str | None = None) -> Iterator[SlotUse]:
    """Hold the machine's timing slot for the ``with`` body (blocks while another process holds it).

    ``purpose`` names the holder in debug logs only.
    Where the lock file cannot be opened at all the body runs unlocked (``waited_s`` 0.0) rather
    than failing a verification: the slot improves precision, it is not a security layer.
    """
    p = lock_path or path()
    depth = getattr(_local, "depth", 0)
    if depth:
        _local.depth = depth + 1
        try:
            yield SlotUse(path=p, waited_s=0.0, nested=True)
        finally:
            _local.depth -= 1
        return
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            fd = -1
    t0 = time.monotonic()
    if fd >= 0:
        fcntl.flock(fd, fcntl.LOCK_EX)
    waited_s = time.monotonic() - t0
    _local.depth = 1
    try:
        yield SlotUse(path=p, waited_s=round(waited_s, 4), nested=False)
    finally:
        _local.depth = 0
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
