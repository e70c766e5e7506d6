"""Judging: read a runner's output straight from its memory (``process_vm_readv``), by the judge.

Why (issue 33): an output read by code in the candidate's own process can be made to exist only
when read. A ReLU wrote a third of its output, left the other pages protected and filled them in a
``SIGSEGV`` handler on first read: only checked calls were ever read, so the timed calls did a
third of the work (2.03x where its twin read 1.03x). And an output copied out by a ``fetch``
command tells the candidate, after the fact, which calls were checked.

Here the kernel reads the runner's pages on the judge's behalf: no code of the runner runs (a
protected page is an ``EFAULT``, never a signal handler), nothing in the runner's process sees
it, and the words read are the bytes the runner holds at that moment. Inside every timed call's
window the judge reads ``SPOT_MIN``-``SPOT_MAX`` elements of each output at positions it drew in secret
for that round (the same positions for every implementation, so the cost is the same too); after
the round it compares them with the reference's. A full read (an audit) needs no message either.

The runner reports where its output lies (``CallReply.out``); that report is untrusted and
needs no trust: whatever bytes lie at the address it names are what the judge compares.
Reading needs ptrace access to the runner (same uid, runner dumpable, the judge's Landlock
domain an ancestor of the runner's): a runner that makes itself non-dumpable makes its output
unreadable, which is a rejection, not a pass.
"""

from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pragma.tools.shm import DTYPES, storage_elements

# Elements read per output per timed call (one process_vm_readv). Each scattered element costs the
# judge ~1 us of kernel time (a page lookup in the runner), inside every timed window, for every
# implementation alike: the judge picks a count between these bounds worth about SPOT_BUDGET of the
# reference's call time (judge.py), so the read stays small beside the call it closes.
SPOT_MIN, SPOT_MAX = 16, 256
SPOT_BUDGET = 0.01
SPOT_READ_US = 1.0
SMALL_BYTES = 64 << 10  # an output this small is read whole in one piece (cheaper than scattered reads)
MAX_OUTPUTS = 8  # outputs spot-read per call (the first ones; all are read by a full audit)
_IOV_MAX = 1024  # remote iovecs per process_vm_readv (Linux UIO_MAXIOV)

_libc = ctypes.CDLL(None, use_errno=True)
_readv = getattr(_libc, "process_vm_readv", None)
if _readv is not None:
    _readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    _readv.restype = ctypes.c_ssize_t


class Unreadable(Exception):
    """The output is not where the runner said, not mapped, or not readable by the judge."""


@dataclass
class Where:
    """One output tensor as the runner reported it (validated for type and size, not trusted)."""

    ptr: int
    shape: list[int]
    stride: list[int]
    dtype: torch.dtype

    @property
    def item(self) -> int:
        return torch.empty(0, dtype=self.dtype).element_size()

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def parse(report: Any, max_bytes: int) -> list[Where]:
    """The ``out`` field of a call reply, field by field (raises Unreadable)."""
    if not isinstance(report, list) or not 1 <= len(report) <= 64:
        raise Unreadable("the call reply names no output")
    out = []
    for i, r in enumerate(report):
        if not isinstance(r, dict):
            raise Unreadable(f"output {i}: not a CPU tensor (the judge reads only host memory)")
        ptr, shape, stride, dtype = r.get("ptr"), r.get("shape"), r.get("stride"), r.get("dtype")

        def ints(xs: Any) -> bool:
            return isinstance(xs, list) and len(xs) <= 16 and all(type(x) is int and x >= 0 for x in xs)

        if type(ptr) is not int or ptr <= 0 or not (ints(shape) and ints(stride) and len(shape) == len(stride)):
            raise Unreadable(f"output {i}: malformed address report")
        if dtype not in DTYPES:
            raise Unreadable(f"output {i}: dtype {str(dtype)[:20]} cannot be read")
        w = Where(ptr=ptr, shape=shape, stride=stride, dtype=DTYPES[dtype])
        if storage_elements(shape, stride) * w.item > max_bytes:
            raise Unreadable(f"output {i}: spans more than {max_bytes} bytes")
        out.append(w)
    return out


def _read_iovs(pid: int, local: torch.Tensor, remote: np.ndarray) -> None:
    """``remote``: int64 (n, 2) of (address, length); ``local``: the bytes they fill, in order."""
    if _readv is None:
        raise Unreadable("process_vm_readv is not available")
    done = 0
    liov = np.empty(2, dtype=np.int64)
    for start in range(0, remote.shape[0], _IOV_MAX):
        chunk = np.ascontiguousarray(remote[start : start + _IOV_MAX])
        want = int(chunk[:, 1].sum())
        liov[0], liov[1] = local.data_ptr() + done, want
        got = _readv(pid, liov.ctypes.data, 1, chunk.ctypes.data, chunk.shape[0], 0)
        if got != want:
            err = ctypes.get_errno() if got < 0 else 0
            why = os.strerror(err) if err else f"{max(got, 0)} of {want} bytes (a page is not mapped or not readable)"
            raise Unreadable(why)
        done += want


def spot(pid: int, where: Where, unit: torch.Tensor) -> torch.Tensor:
    """Elements at flat positions ``floor(unit * numel)`` of the output (row-major order).

    Index arithmetic in numpy: it runs inside the timed window, and a numpy op on a few hundred
    elements costs ~1 us where a torch op costs several."""
    n = where.numel
    if n == 0:
        return torch.empty(0, dtype=where.dtype)
    u = unit.numpy()
    pos = np.minimum((u * n).astype(np.int64), n - 1)
    item = where.item
    if storage_elements(where.shape, where.stride) * item <= SMALL_BYTES:
        return full(pid, where).reshape(-1)[torch.from_numpy(pos)]
    offset = np.zeros_like(pos)
    for size, stride in zip(reversed(where.shape), reversed(where.stride), strict=True):
        offset += (pos % size) * stride
        pos //= size
    remote = np.empty((u.size, 2), dtype=np.int64)
    remote[:, 0] = offset * item + where.ptr
    remote[:, 1] = item
    local = torch.empty(u.size * item, dtype=torch.uint8)
    _read_iovs(pid, local, remote)
    return local.view(where.dtype)


def full(pid: int, where: Where) -> torch.Tensor:
    """The whole output, copied into judge memory."""
    extent = storage_elements(where.shape, where.stride)
    local = torch.empty(max(extent, 1) * where.item, dtype=torch.uint8)
    if extent:
        _read_iovs(pid, local, np.array([[where.ptr, extent * where.item]], dtype=np.int64))
    return local.view(where.dtype)[:extent].as_strided(where.shape, where.stride)
