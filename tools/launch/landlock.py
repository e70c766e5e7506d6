"""Landlock (Linux >= 5.13): confine a process's writes to a few directories, without privileges.

The worker calls :func:`confine` on itself before it imports any candidate code, so the candidate,
the compiler it starts and everything they fork can read the machine (Python, torch, headers) but
can create, change or delete files only under the allowed directories (the private workdir and
the shared build cache). Where the kernel's ABI allows, TCP bind/connect is denied too (a second
fence behind the network namespace) and signals to processes outside the sandbox are blocked.

Standard library only (ctypes on the raw system calls). Landlock cannot be undone by the
confined process, and the restriction is inherited across fork and exec.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform

# System call numbers are the same on x86_64 and aarch64 (the unified table of new syscalls).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem access rights (include/uapi/linux/landlock.h), by the ABI version that added them.
_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
_MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_SUPPORTED_ARCHES = ("x86_64", "aarch64")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """Landlock ABI the kernel offers; 0 when Landlock is missing or disabled."""
    if platform.system() != "Linux" or platform.machine() not in _SUPPORTED_ARCHES:
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _write_rights(abi: int) -> tuple[int, int]:
    """(rights for directories, rights for single files) that Landlock will police."""
    dir_rights = (
        _WRITE_FILE
        | _REMOVE_DIR
        | _REMOVE_FILE
        | _MAKE_CHAR
        | _MAKE_DIR
        | _MAKE_REG
        | _MAKE_SOCK
        | _MAKE_FIFO
        | _MAKE_BLOCK
        | _MAKE_SYM
    )
    file_rights = _WRITE_FILE
    if abi >= 2:
        dir_rights |= _REFER
    if abi >= 3:
        dir_rights |= _TRUNCATE
        file_rights |= _TRUNCATE
    return dir_rights, file_rights


def confine(writable: list[str], scope_abstract_unix: bool = False) -> str:
    """Allow writes only beneath ``writable`` (directories, or files such as /dev/null).

    Each call adds a layer (a nested domain): a process in it cannot signal, ptrace or read the
    ``/proc/<pid>/mem|environ`` of processes outside its own domain (the judge, sibling runners).
    ``scope_abstract_unix`` also keeps it from connecting to abstract unix sockets outside it.

    Returns a one-line description of what applied, starting with "none:" when nothing did.
    """
    abi = abi_version()
    if abi < 1:
        return "none: Landlock is not available in this kernel"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    dir_rights, file_rights = _write_rights(abi)
    attr = _RulesetAttr(handled_access_fs=dir_rights)
    size = 8
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP  # no rule added: all TCP denied
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_SIGNAL | (
            _SCOPE_ABSTRACT_UNIX if scope_abstract_unix else 0
        )  # nothing outside this domain
        size = 24
    ruleset_fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        return f"none: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        for path in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a missing path needs no rule: nothing can be written there anyway
            try:
                rights = dir_rights if os.path.isdir(path) else file_rights
                rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
                if (
                    libc.syscall(_SYS_ADD_RULE, ruleset_fd, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
                    < 0
                ):
                    return f"none: landlock_add_rule({path}) failed ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"none: prctl(NO_NEW_PRIVS) failed ({os.strerror(ctypes.get_errno())})"
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset_fd, ctypes.c_uint32(0)) < 0:
            return f"none: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset_fd)
    extras = (", TCP denied" if abi >= 4 else "") + (", signals scoped" if abi >= 6 else "")
    return f"landlock ABI {abi}: writes only under {len(writable)} allowed paths{extras}"


def device_writable(device: str) -> list[str]:
    """What a process initialising CUDA must be able to write: the device nodes (opened read-write
    for the driver's ioctls) and its own ``/proc/self``. Why the latter: with every other rule in
    place, cuInit failed with error 304 ("OS call failed") until writes under /proc/self were
    allowed (bisected on an H100, kernel 6.18, Landlock ABI 7, 2026-11-27: the driver writes there).
    ``/proc/self`` resolves to the process that adds the rule, so it opens nothing of another
    process; a layer made for processes forked later needs ``for_children``."""
    if device != "cuda":
        return []
    nodes = sorted(glob.glob("/dev/nvidia*")) + [p for p in ("/dev/dxg",) if os.path.exists(p)]
    return [*nodes, "/proc/self"]


def for_children(writable: list[str]) -> list[str]:
    """``writable`` for a layer whose processes fork the ones that write (the judge's): its
    ``/proc/self`` would name the forking process only, so the layer allows ``/proc`` and each
    child's own layer narrows it back to its ``/proc/self`` (a write must pass every layer)."""
    return ["/proc" if p == "/proc/self" else p for p in writable]
