"""Launching: fork a runner process from the judge and hold the judge's end of its socket.

The judge calls :func:`fork_runner` right after importing torch and before it draws a seed or
imports the problem, so a runner's memory holds nothing secret. The child, before it serves:
- gets its own process group (the judge stops and continues the whole group: ``SIGSTOP`` reaches
  every thread and child of the candidate that has not left the group);
- dies with the judge (``PR_SET_PDEATHSIG``);
- closes every descriptor but stdio and its socket;
- drops every capability (``drop_capabilities``; it matters where PRAGMA runs as root);
- adds its own Landlock layer (``landlock.confine``): same write rules, plus signals and abstract
  unix sockets scoped to its own domain, and no ptrace or ``/proc/<pid>/mem|environ`` of a process
  outside it (the judge, the other runners): Landlock denies those even to root;
- except the reference's, runs under ``seccomp.confine_runner``: no ``flock`` (no lock PRAGMA
  coordinates through, the machine's timing slot or a data dir's run locks, can be held or waited
  for by candidate code, or the best's, LLM code too), no scheduling, signals or memory of another
  process, no affinity change (the judge pins every runner to the same cores right after the fork,
  and whatever the candidate starts stays on them), no ``clone3``.
Only then does it import the runner loop (``pragma.tools.inside.runner``): the judge process never
executes a line of it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
from dataclasses import dataclass, field
from typing import Any

from pragma.tools.wire import protocol

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_CAP_LAST = 63
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def drop_capabilities() -> str:
    """Empty the bounding, permitted, effective and inheritable capability sets of this process.

    Where PRAGMA runs as root, a runner stays uid 0 (the build cache and the problem live in
    root-only directories such as /root/.pragma) but holds no capability: no CAP_DAC_OVERRIDE
    (files of other users), no CAP_SYS_PTRACE (a non-dumpable judge's memory), no CAP_SYS_ADMIN
    (mounts, namespaces), no CAP_KILL; an exec'd binary cannot regain any (bounding set empty)."""
    import platform

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(_CAP_LAST + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the kernel's last cap: ignored
    nr = _SYS_CAPSET.get(platform.machine())
    if nr is None:
        return "none: capset number unknown on this architecture"
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} structs, all zero
    if libc.syscall(nr, header, data) != 0:
        return f"none: capset failed ({os.strerror(ctypes.get_errno())})"
    return "no capabilities (bounding set empty)" if os.geteuid() == 0 else "unprivileged uid"


@dataclass
class RunnerHandle:
    role: str  # "reference", "candidate" or "best"
    pid: int  # also its process group id
    sock: socket.socket  # the judge's end
    confinement: str = ""  # what the runner's own Landlock layer reported (filled after load)
    dead: str = ""  # how it ended, once it has ("SIGSEGV", "exit code 1")
    stopped: bool = False  # the judge has SIGSTOPped its group
    extra: dict[str, Any] = field(default_factory=dict)

    def request(self, header: dict[str, Any], fds: list[int] | None = None, payload: Any = None) -> dict[str, Any]:
        """Send one command and wait for its reply. EOFError (with ``dead`` set) if the runner died."""
        try:
            protocol.send(self.sock, header, fds, payload)
            return protocol.recv_reply(self.sock)
        except (EOFError, BrokenPipeError, ConnectionResetError) as exc:
            self.reap()
            raise EOFError(self.dead or str(exc)) from None

    def reap(self) -> str:
        """Wait for a runner that closed its socket; ``dead`` names how it ended."""
        if self.dead:
            return self.dead
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            self.dead = "exited"
            return self.dead
        if os.WIFSIGNALED(status):
            self.dead = signal.Signals(os.WTERMSIG(status)).name
        else:
            self.dead = f"exit code {os.WEXITSTATUS(status)}"
        return self.dead

    def stop(self) -> bool:
        """SIGSTOP the runner's process group and wait until the runner itself has stopped."""
        try:
            os.killpg(self.pid, signal.SIGSTOP)
            while True:
                _, status = os.waitpid(self.pid, os.WUNTRACED)
                if os.WIFSTOPPED(status):
                    self.stopped = True
                    return True
                if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                    self.dead = (
                        signal.Signals(os.WTERMSIG(status)).name
                        if os.WIFSIGNALED(status)
                        else f"exit code {os.WEXITSTATUS(status)}"
                    )
                    return False
        except (ProcessLookupError, ChildProcessError, PermissionError):
            return False

    def cont(self) -> None:
        if self.stopped:
            try:
                os.killpg(self.pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
            self.stopped = False

    def kill(self) -> None:
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def prime_torch() -> None:
    """Run torch's lazy imports that a dispatch mode and the FLOP counter trigger (~1.5 s here), once,
    before forking: every runner then starts with them loaded (the pre-started judge pays it once)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class _Noop(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with _Noop():
        torch.empty(1)
    with FlopCounterMode(display=False):
        torch.ones(2, 2) @ torch.ones(2, 2)


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_STEADY_HEAP_BYTES = 1 << 30


def steady_heap(libc: ctypes.CDLL) -> None:
    """Every runner (reference and candidate alike) allocates from a heap that is kept, not mapped
    and unmapped per call. glibc's defaults move its mmap threshold with the history of frees and
    return the top of the heap to the kernel past a trim threshold, so whether a call's 16 MB
    temporaries cost fresh page faults depended on the order of earlier frees: the same rms_norm
    reference timed 4.4-5.9 ms in one process and 20.9-28.1 ms in the next (the same kernel read
    2.35x and 10.88x). Fixed thresholds of 1 GiB make every role run in the steady state a long-lived
    PyTorch process reaches, whatever came before; blocks over 1 GiB are still mapped."""
    libc.mallopt(_M_MMAP_THRESHOLD, _STEADY_HEAP_BYTES)
    libc.mallopt(_M_TRIM_THRESHOLD, _STEADY_HEAP_BYTES)


def fork_runner(role: str, writable: list[str], cores: list[int] | None = None) -> RunnerHandle:
    """Fork ``role``'s runner; ``cores``: the CPUs it is pinned to before anything else runs in it
    (every thread and child it starts inherits them; its seccomp filter keeps them fixed)."""
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:  # the runner
        code = 0
        try:
            if cores:
                try:
                    os.sched_setaffinity(0, cores)
                except OSError:
                    pass  # the judge pins it from its side too, and records what held
            parent_sock.close()
            os.setpgid(0, 0)
            drop_capabilities()
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            steady_heap(libc)
            keep = child_sock.fileno()
            os.closerange(3, keep)
            os.closerange(keep + 1, 1 << 16)
            from pragma.tools.launch import landlock

            landlock.confine(writable, scope_abstract_unix=True)
            if role != "reference":  # LLM code; the problem's own Model may use torch.compile (file locks)
                from pragma.tools.launch import seccomp

                seccomp.confine_runner()  # the judge reads from /proc whether it applied
            from pragma.tools.inside import runner

            runner.serve(child_sock, role)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    child_sock.close()
    try:
        os.setpgid(pid, pid)  # also from this side: no race with the first killpg
    except OSError:
        pass
    return RunnerHandle(role=role, pid=pid, sock=parent_sock)
