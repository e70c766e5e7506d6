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

from pragma.tools.wire.shm import DTYPES, storage_elements

# Elements read per output per timed call (one process_vm_readv). Each scattered element costs the
# judge ~1 us of kernel time on a warm machine (a page lookup in the runner) and ~4 us right after
# a call that streamed the caches out (the runner's page tables are cold then), inside every timed
# window, for every implementation alike: the judge picks a count between these bounds worth about
# SPOT_BUDGET of the reference's call time (audits.py: Audits._spot_count), so the read stays small
# beside the call.
SPOT_MIN, SPOT_MAX = 16, 256
SPOT_BUDGET = 0.01
SPOT_READ_US = 4.0
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


@dataclass
class Prepared:
    """A spot read made ready between rounds for an output layout the runner reported before: the
    byte offsets of this round's positions, so that inside the timed window only the read itself
    runs (the judge's Python work there is slow: the call it follows has just streamed the caches
    out, 60-80 us for a parse after a ReLU call on the 2-core EPYC)."""

    layout: list[Where]  # ptr of each entry unused: the call's own ptr is added at read time
    offsets: list[np.ndarray]  # per read output: byte offsets (scattered) or [0] (read whole)
    remote: list[np.ndarray]  # per read output: (n, 2) int64 iovecs, column 0 filled at read time
    local: list[torch.Tensor]  # per read output: the bytes read
    positions: list[np.ndarray]  # per read output: flat positions (for an output read whole)
    whole: list[bool]  # per read output: read in one piece (small), else element by element


def prepare_spot(layout: list[Where], unit: torch.Tensor) -> Prepared:
    u = unit.numpy()
    offsets, remote, local, positions, whole = [], [], [], [], []
    for w in layout[:MAX_OUTPUTS]:
        n, item = w.numel, w.item
        pos = np.minimum((u * n).astype(np.int64), max(n - 1, 0))
        extent = storage_elements(w.shape, w.stride) * item
        if n == 0 or extent <= SMALL_BYTES:
            offsets.append(np.zeros(1, dtype=np.int64))
            remote.append(np.array([[0, extent]], dtype=np.int64))
            local.append(torch.empty(max(extent, 1), dtype=torch.uint8))
        else:
            off, rest = np.zeros_like(pos), pos.copy()
            for size, stride in zip(reversed(w.shape), reversed(w.stride), strict=True):
                off += (rest % size) * stride
                rest //= size
            offsets.append(off * item)
            r = np.empty((u.size, 2), dtype=np.int64)
            r[:, 1] = item
            remote.append(r)
            local.append(torch.empty(u.size * item, dtype=torch.uint8))
        positions.append(pos)
        whole.append(n == 0 or extent <= SMALL_BYTES)
    return Prepared(layout=layout, offsets=offsets, remote=remote, local=local, positions=positions, whole=whole)


def matches(prep: Prepared, report: Any) -> bool:
    """Whether the call reported the layout ``prep`` was made for (cheap: list comparisons)."""
    if not isinstance(report, list) or len(report) != len(prep.layout):
        return False
    for w, r in zip(prep.layout[:MAX_OUTPUTS], report, strict=False):
        if not isinstance(r, dict) or type(r.get("ptr")) is not int or r["ptr"] <= 0:
            return False
        if r.get("shape") != w.shape or r.get("stride") != w.stride or DTYPES.get(r.get("dtype")) != w.dtype:
            return False
    return True


def read_prepared(pid: int, prep: Prepared, report: Any) -> None:
    """The read itself, for a report ``matches`` accepted (a list: the call's reply, unchecked
    by type until ``matches``; raises Unreadable)."""
    for k in range(len(prep.offsets)):
        prep.remote[k][:, 0] = prep.offsets[k] + report[k]["ptr"]
        if prep.remote[k][0, 1]:
            _read_iovs(pid, prep.local[k], prep.remote[k])


def prepared_values(prep: Prepared) -> list[torch.Tensor]:
    """The elements a ``read_prepared`` brought back, per read output."""
    out = []
    for w, raw, pos, whole in zip(prep.layout, prep.local, prep.positions, prep.whole, strict=False):
        if whole and w.numel:  # read in one piece: pick the positions out of it
            extent = storage_elements(w.shape, w.stride)
            whole = raw.view(w.dtype)[:extent].as_strided(w.shape, w.stride)
            out.append(whole.reshape(-1)[torch.from_numpy(pos)].clone())
        elif w.numel == 0:
            out.append(torch.empty(0, dtype=w.dtype))
        else:
            out.append(raw.view(w.dtype).clone())
    return out
