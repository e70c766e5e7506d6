"""One live process per run: a thread (an ``optimize`` run, an eval job, an eval run) is advanced
by one process at a time.

The lock is an ``flock`` on ``DATA_DIR/locks/NAME.lock``, held for the life of the process that
advances the thread. The kernel releases it when that process dies, however it dies (SIGKILL
included), so a killed run can be resumed at once, and no stale lock is ever left to clean up.
The file holds the holder's pid, host and start time, for the one-line refusal a second process
gets. Locks are per machine (the data dir's file system): two machines sharing a PostgreSQL
checkpointer are not covered.

Re-entrant within a process (the CLI holds its thread's lock and the graph's nodes take it again
for Studio, see ``graph/builder.py``). A forked child does not inherit its parent's locks: it
closes the inherited descriptors (the parent keeps holding), so an eval job locks its own thread.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pragma.graph.context import data_dir


class RunLocked(RuntimeError):
    """Another live process advances this thread: one line naming it, exit code 2 in the CLI.

    A RuntimeError so that the LangGraph API server shows its message in Studio (it hides the
    messages of exception types it does not know)."""


_held: dict[str, list[int]] = {}  # lock name -> [fd, depth] in this process
_guard = threading.Lock()


def _forget_after_fork() -> None:
    for fd, _ in _held.values():
        try:
            os.close(fd)  # the parent still holds the lock through its own descriptor
        except OSError:
            pass
    _held.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def lock_path(name: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    if len(safe) > 120:
        safe = safe[:100] + "-" + hashlib.sha256(name.encode()).hexdigest()[:16]
    folder = data_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{safe}.lock"


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 4096).decode() or "{}")
    except (OSError, ValueError):
        return {}


def describe(name: str, holder: dict[str, Any], what: str = "run") -> str:
    if not holder.get("pid"):
        return f"{what} {name} is being advanced by another live process; wait for it to end or stop it"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("since", 0))))
    return (
        f"{what} {name} is being advanced by pid {holder['pid']} on {holder.get('host', '?')} since {since} "
        f"({holder.get('command', '?')}); wait for it to end or stop it (kill {holder['pid']}), then resume"
    )


@contextmanager
def hold(name: str, what: str = "run", label: str | None = None) -> Iterator[None]:
    """Hold ``name``'s lock for the ``with`` body, or raise RunLocked at once (never waits)."""
    with _guard:
        entry = _held.get(name)
        if entry is not None:
            entry[1] += 1
            nested = True
        else:
            nested = False
            fd = os.open(lock_path(name), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunLocked(describe(label or name, holder, what)) from None
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "since": time.time(),
                "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:4]))[:160],
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
            _held[name] = [fd, 1]
    try:
        yield
    finally:
        with _guard:
            entry = _held.get(name)
            if entry is not None:
                entry[1] -= 1
                if entry[1] == 0 and not nested:
                    del _held[name]
                    fcntl.flock(entry[0], fcntl.LOCK_UN)
                    os.close(entry[0])
                elif entry[1] == 0:  # the outer holder left first (cannot happen with `with`)
                    del _held[name]
                    os.close(entry[0])


def holder(name: str) -> dict[str, Any] | None:
    """The live process holding ``name`` (pid, host, since), or None when no process does."""
    with _guard:
        if name in _held:
            return {"pid": os.getpid(), "host": socket.gethostname()}
    path = lock_path(name)
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or {"pid": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def eval_run_name(run_id: str) -> str:
    return f"eval-run-{run_id}"


def one_process(node):
    """Wrap a graph node so it runs only while no other process advances its thread.

    The CLI and eval jobs hold their thread's lock for their whole life, so this is free there
    (re-entrant). It guards what they do not: a run of the checkpointer-less ``graph`` served by
    ``langgraph dev`` / Studio on a thread a CLI process is advancing fails in its next node with
    the one-line RunLocked message, before that node does any work (no LLM request, no build).
    """
    import functools

    from langgraph.config import get_config

    @functools.wraps(node)
    def guarded(state, *args, **kwargs):
        try:
            thread_id = (get_config().get("configurable") or {}).get("thread_id")
        except RuntimeError:  # called outside a graph run (unit tests call nodes directly)
            thread_id = None
        if not thread_id:
            return node(state, *args, **kwargs)
        with hold(str(thread_id)):
            return node(state, *args, **kwargs)

    return guarded
