"""Worker processes for jobs, and the hard per-problem time budget.

A job runs in its own process (forked: it inherits the parent's setup, e.g. an installed chat
model; or exec'd, for Ray tasks and wherever a fork is unsafe, see ``fork_unsafe_reason``). Past its budget the whole process tree is killed: the job, the
sandboxes it started (those run in sessions of their own, so killing the group is not enough)
and anything they forked. The tree is collected before anything is killed, because orphans are
re-parented and could no longer be found.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pragma.eval.db import ResultsDB
from pragma.eval.job import LOCKED_EXIT, JobSpec, child_main

log = logging.getLogger(__name__)
_FORK = multiprocessing.get_context("fork")


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # The command name may contain spaces and parentheses: split after the last ')'.
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    children, found, todo = _children_map(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> int:
    """SIGKILL ``pid`` and all its descendants; returns how many processes were signalled."""
    victims = [pid, *descendants(pid)]
    for p in victims:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    return len(victims)


def _forked_entry(spec_json: str) -> None:
    sys.exit(child_main(JobSpec.from_json(spec_json)))


# Native libraries whose background threads make a forked copy of the process unsafe: a lock one
# of their threads held at the fork stays held in the child forever. Chroma's Rust core is one: a
# process that had opened the knowledge store (a Coder node run in-process, a notebook, Studio)
# forked jobs that hung in their first allocation or import.
FORK_UNSAFE_MODULES = ("chromadb",)


def fork_unsafe_reason() -> str:
    """Why this process must not fork a job ("" when forking is safe)."""
    loaded = [m for m in FORK_UNSAFE_MODULES if m in sys.modules]
    return f"{', '.join(loaded)} is loaded here (its native threads do not survive a fork)" if loaded else ""


@dataclass
class Running:
    spec: JobSpec
    prior_wall_s: float  # spent on this job by earlier (interrupted) runs
    started: float = field(default_factory=time.monotonic)
    process: Any = None  # multiprocessing.Process or subprocess.Popen
    spec_file: str | None = None  # the JobSpec handed to a fresh interpreter; removed when reaped

    @property
    def pid(self) -> int:
        return self.process.pid

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def exit_code(self) -> int | None:
        if isinstance(self.process, subprocess.Popen):
            return self.process.poll()
        return None if self.process.is_alive() else self.process.exitcode

    def reap(self) -> None:
        """Wait for the (exited or killed) process, whichever kind it is."""
        if isinstance(self.process, subprocess.Popen):
            self.process.wait()
        else:
            self.process.join()
        if self.spec_file:  # the child removes it once read; this covers one that died first
            Path(self.spec_file).unlink(missing_ok=True)


def start(spec: JobSpec, prior_wall_s: float, *, exec_python: bool = False) -> Running:
    running = Running(spec, prior_wall_s)
    if not exec_python and (why := fork_unsafe_reason()):
        # A fresh interpreter instead: it re-imports (a few seconds) and gets the parent's setup
        # only through PRAGMA_EVAL_SETUP_HOOK, but it cannot inherit a held lock.
        log.info("starting %s [%s] as a new interpreter: %s", spec.problem["name"], spec.mode, why)
        exec_python = True
    if exec_python:
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="pragma-job-", delete=False) as f:
            f.write(spec.to_json())
        running.spec_file = f.name
        running.process = subprocess.Popen([sys.executable, "-m", "pragma.eval.job", f.name])
    else:
        running.process = _FORK.Process(target=_forked_entry, args=(spec.to_json(),), daemon=False)
        running.process.start()
    return running


def settle(
    db: ResultsDB, running: Running, *, killed_for_budget: float | None = None, interrupted: bool = False
) -> str:
    """Record how a job process ended; returns the job's final status in the database."""
    spec = running.spec
    name, mode = spec.key
    if killed_for_budget is None and not interrupted and running.exit_code() == LOCKED_EXIT:
        log.warning("%s [%s]: another live process advances this job; left to it", name, mode)
        return "locked"  # that process owns the job's rows: write nothing
    db.add_wall(spec.run_id, name, mode, running.elapsed_s())
    base = {
        "run_id": spec.run_id,
        "problem": name,
        "mode": mode,
        "category": spec.problem["category"],
        "path": spec.problem["path"],
        "sha256": spec.problem["sha256"],
    }
    if killed_for_budget is not None:
        db.upsert(
            "eval_problems",
            {
                **base,
                "status": "budget_exceeded",
                "finished_at": time.time(),
                "message": f"killed after the per-problem budget of {killed_for_budget:.0f} s",
            },
        )
        _best_from_attempts(db, spec)
        return "budget_exceeded"
    if interrupted:
        db.upsert("eval_problems", {**base, "status": "interrupted", "message": "the harness was interrupted"})
        return "interrupted"
    rows = db.query(
        "SELECT status FROM eval_problems WHERE run_id=? AND problem=? AND mode=?", (spec.run_id, name, mode)
    )
    status = rows[0]["status"] if rows else "missing"
    if status == "running":  # the process died without recording an end (a crash, a signal)
        code = running.exit_code()
        db.upsert("eval_problems", {**base, "status": "error", "message": f"worker process exited with code {code}"})
        return "error"
    return status


def budget_best(state: dict[str, Any], attempt_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The eval_problems fields of a job killed at its budget: the verifier's last accepted best
    (state ``best`` from the job's last checkpoint), never an unaccepted or merely faster attempt.
    ``attempt_rows``: the job's recorded attempts (for the best's CI and the attempt count)."""
    best = state.get("best") or {}
    row = next((a for a in attempt_rows if int(a["iteration"]) == int(best.get("iteration", -1))), {})
    ci = best.get("speedup_ci") or [None, None]
    iterations = max(int(state.get("iteration", 0) or 0), len(attempt_rows))
    return {
        "solved": int(bool(best)),
        "best_speedup": float(best.get("speedup", 0.0)),
        "best_iteration": int(best.get("iteration", 0)),
        "best_ci_low": row.get("ci_low", ci[0]) if best else None,
        "best_ci_high": row.get("ci_high", ci[1]) if best else None,
        "iterations": iterations,
    }


def _checkpoint_state(spec: JobSpec) -> dict[str, Any]:
    from pragma.eval import store
    from pragma.graph.builder import compile_app

    config = {"configurable": {"thread_id": store.thread_id(spec.run_id, spec.mode, spec.problem["name"])}}
    with store.checkpointer(spec.checkpoint_url) as saver:
        return compile_app(saver).get_state(config).values or {}


def _best_from_attempts(db: ResultsDB, spec: JobSpec) -> None:
    """A job killed for its budget keeps the verifier's last accepted best (see budget_best)."""
    name, mode = spec.key
    rows = db.query(
        "SELECT iteration, status, speedup, accepted, ci_low, ci_high FROM eval_attempts WHERE run_id=? "
        "AND problem=? AND mode=?",
        (spec.run_id, name, mode),
    )
    try:
        state = {} if spec.mode == "torch.compile" else _checkpoint_state(spec)
    except Exception as exc:  # an unreadable checkpoint: keep no best rather than guess one
        log.warning("%s [%s]: checkpoint unreadable after the budget kill: %s", name, mode, exc)
        state = {}
    db.upsert("eval_problems", {"run_id": spec.run_id, "problem": name, "mode": mode, **budget_best(state, rows)})


def run_supervised(spec: JobSpec, budget_s: float, prior_wall_s: float = 0.0, poll_s: float = 0.5) -> str:
    """Run one job to its end or its budget, blocking (a Ray task's body)."""
    db = ResultsDB(spec.results_url)
    running = start(spec, prior_wall_s, exec_python=True)
    while running.exit_code() is None:
        if budget_s and running.prior_wall_s + running.elapsed_s() > budget_s:
            kill_tree(running.pid)
            running.process.wait()
            return settle(db, running, killed_for_budget=budget_s)
        time.sleep(poll_s)
    return settle(db, running)
