"""Shared-memory regions (``memfd_create`` + ``mmap``) and tensor views into them.

Neutral ground (torch + standard library; both the judge and the runners import it). The judge
creates one input region and one output region per runner and passes their descriptors over the
runner's socket: a runner can map only the regions it was handed, so it cannot read or write
another runner's inputs or outputs, nor the judge's own copies (which live in the judge's private
memory, not in any region).

The one exception is the timed rounds' input region: every runner reads the same physical pages
there (see ``Judge.timing``), so the region is sealed against writes (``seal_writes``) before any
runner gets it, and runners map it read-only.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import warnings
from typing import Any

import torch
from torch._prims_common import (
    is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense,
)

from pragma.tools.wire.protocol import TensorSpec

ALIGN_BYTES = 64  # cache-line alignment for every tensor in a region
# Linux 5.1+: no new writable mapping and no write() on the memfd, while mappings made before the
# seal stay writable (the judge's). Python 3.11's fcntl does not name it.
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)

DTYPES: dict[str, torch.dtype] = {
    str(d).replace("torch.", ""): d
    for d in (
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int8,
        torch.uint8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
        torch.complex64,
        torch.complex128,
    )
}


class Region:
    """A memfd of ``size_bytes`` mapped read-write; ``fd`` is what crosses to a runner."""

    def __init__(self, size_bytes: int, name: str = "pragma-region", fd: int | None = None, writable: bool = True):
        self.size_bytes = max(ALIGN_BYTES, int(size_bytes))
        if fd is None:
            fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, self.size_bytes)
        self.fd = fd
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self.map = mmap.mmap(fd, self.size_bytes, mmap.MAP_SHARED, prot)
        with warnings.catch_warnings():
            # A read-only mapping is the point: a write through it faults (and ends the process).
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            self._bytes = torch.frombuffer(self.map, dtype=torch.uint8)

    def seal_writes(self) -> str:
        """Forbid every later writable mapping, ``write()`` and resize of this memfd; '' or why not.

        This process's own mapping stays writable. A runner handed the descriptor afterwards can
        only map it read-only (mmap or mprotect with PROT_WRITE fail with EPERM)."""
        try:
            fcntl.fcntl(
                self.fd,
                fcntl.F_ADD_SEALS,
                F_SEAL_FUTURE_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL,
            )
        except OSError as exc:  # kernels before 5.1, or a memfd made without MFD_ALLOW_SEALING
            return f"memfd write seal refused: {exc}"
        return ""

    def view(self, spec: TensorSpec) -> torch.Tensor:
        """The tensor ``spec`` describes, sharing this region's memory."""
        dtype = DTYPES[spec["dtype"]]
        item = torch.empty(0, dtype=dtype).element_size()
        extent = storage_elements(spec["shape"], spec["stride"])
        if spec["offset"] % item or spec["offset"] + extent * item > self.size_bytes:
            raise ValueError(f"tensor spec outside the region: {spec}")
        flat = self._bytes[spec["offset"] : spec["offset"] + extent * item].view(dtype)
        return flat.as_strided(spec["shape"], spec["stride"])

    def close(self) -> None:
        try:
            del self._bytes
            self.map.close()
        except (BufferError, ValueError):
            pass  # views still alive: the mapping goes with the process
        try:
            os.close(self.fd)
        except OSError:
            pass


def storage_elements(shape: list[int], stride: list[int]) -> int:
    """Elements a strided view spans (0 for an empty tensor)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride, strict=True))


def _aligned(n: int) -> int:
    return (n + ALIGN_BYTES - 1) // ALIGN_BYTES * ALIGN_BYTES


def layout(values: list[Any]) -> tuple[list[TensorSpec], int]:
    """Specs placing every tensor of ``values`` in one region (strides kept when they describe a
    dense, non-overlapping view, contiguous otherwise), and the region size in bytes."""
    specs: list[TensorSpec] = []
    offset = 0
    for i, v in enumerate(values):
        if not isinstance(v, torch.Tensor):
            continue
        dense = is_non_overlapping_and_dense(v) and all(s >= 0 for s in v.stride())
        stride = list(v.stride()) if dense else list(torch.empty(v.shape).stride())
        nbytes = storage_elements(list(v.shape), stride) * v.element_size()
        specs.append(
            TensorSpec(
                index=i,
                offset=offset,
                shape=list(v.shape),
                stride=stride,
                dtype=str(v.dtype).replace("torch.", ""),
                nbytes=nbytes,
            )
        )
        offset = _aligned(offset + nbytes)
    return specs, offset


def check_output_spec(spec: Any, region_bytes: int, index: int) -> TensorSpec:
    """An output spec from a runner, validated field by field (raises ValueError)."""
    if not isinstance(spec, dict):
        raise ValueError("output spec is not an object")
    shape, stride, dtype = spec.get("shape"), spec.get("stride"), spec.get("dtype")
    offset, nbytes = spec.get("offset"), spec.get("nbytes")

    def ints(xs):
        return isinstance(xs, list) and len(xs) <= 16 and all(type(x) is int and x >= 0 for x in xs)

    if not (ints(shape) and ints(stride) and len(shape) == len(stride)):
        raise ValueError(f"output {index}: malformed shape/stride")
    if dtype not in DTYPES or type(offset) is not int or type(nbytes) is not int or offset < 0:
        raise ValueError(f"output {index}: malformed dtype/offset")
    item = torch.empty(0, dtype=DTYPES[dtype]).element_size()
    if storage_elements(shape, stride) * item != nbytes or offset + nbytes > region_bytes:
        raise ValueError(f"output {index}: {nbytes} bytes at {offset} do not fit the region")
    return TensorSpec(index=index, offset=offset, shape=shape, stride=stride, dtype=dtype, nbytes=nbytes)
