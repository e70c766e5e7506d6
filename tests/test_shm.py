"""Shared-memory regions: the timed rounds' input region is sealed, so a runner handed its
descriptor can read it and nothing more (tools/wire/shm.py, Judge._bind_timed_inputs)."""

import ctypes
import errno
import mmap
import os

import pytest
import torch

from pragma.tools.wire import shm

PAGE = mmap.PAGESIZE


def test_a_sealed_region_can_only_be_read_through_a_new_mapping():
    judge = shm.Region(PAGE)
    judge.map[:4] = b"abcd"
    assert judge.seal_writes() == ""
    fd = os.dup(judge.fd)  # what crosses to a runner
    with pytest.raises(PermissionError):
        mmap.mmap(fd, PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    with pytest.raises(PermissionError):
        os.pwrite(fd, b"x", 0)
    with pytest.raises(PermissionError):
        os.ftruncate(fd, PAGE * 2)
    runner = shm.Region(PAGE, fd=fd, writable=False)
    # mprotect cannot make the read-only mapping writable either (the seal clears VM_MAYWRITE).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(runner._bytes.data_ptr(), PAGE, mmap.PROT_READ | mmap.PROT_WRITE) == -1
    assert ctypes.get_errno() in (errno.EACCES, errno.EPERM)
    # The judge's own mapping, made before the seal, still writes; the runner sees it at once.
    judge.map[0:1] = b"z"
    assert bytes(runner.map[:4]) == b"zbcd"


def test_views_of_a_read_only_region_hold_the_judges_tensors():
    x = [torch.randn(3, 5), 7, torch.arange(6, dtype=torch.int64).reshape(2, 3)]
    specs, size = shm.layout(x)
    judge = shm.Region(size)
    for spec in specs:
        judge.view(spec).copy_(x[spec["index"]])
    assert judge.seal_writes() == ""
    runner = shm.Region(size, fd=os.dup(judge.fd), writable=False)
    for spec in specs:
        assert torch.equal(runner.view(spec), x[spec["index"]])
