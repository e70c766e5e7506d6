"""The evaluation harness: every problem of a suite x every mode, in parallel worker processes.

- One job per problem x mode (``job.py``): a graph thread with the checkpointer, mirrored into
  the results database attempt by attempt.
- ``--workers N`` processes at a time on this machine, or one Ray task per job (``scale.py``).
- A hard time budget per job (``problem_budget_s``, summed over resumes): past it the job's
  process tree is killed and the job recorded as ``budget_exceeded`` with its best so far.
- Resumable: ``resume_run`` skips finished jobs and continues the others from their
  checkpoints (interrupted, crashed, killed with the harness, or never started).
- One live process per run and per job thread (``graph/lock.py``): a second ``--resume`` of a
  run being advanced is refused with one line; a job whose thread another process advances is
  left to it (status ``locked``, nothing written).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pragma.eval import store, supervise
from pragma.eval.baselines import machine_fingerprint
from pragma.eval.db import ResultsDB, loads
from pragma.eval.errors import HarnessError
from pragma.eval.job import AGENT_MODES, SEARCHES, TORCH_COMPILE, JobSpec, is_mode
from pragma.eval.suites import load_suite
from pragma.graph import lock
from pragma.graph.context import Context, context_to_dict

log = logging.getLogger(__name__)
DONE = ("finished", "budget_exceeded")  # never re-run by --resume
POLL_S = 0.25


@dataclass
class RunSettings:
    """How a run executes; stored with the run so ``--resume`` repeats it (workers may change)."""

    workers: int = 2
    problem_budget_s: float = 3600.0
    results_url: str = ""
    checkpoint_url: str = ""
    ray_address: str | None = None
    torch_compile: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def check_modes(modes: list[str], searches: list[str] | None = None) -> list[str]:
    """The run's modes: each agent mode, crossed with each search when --search is given
    ('greedy' keeps the plain name, so 'pragma' and 'pragma+greedy' are one mode)."""
    bad = [m for m in modes if not is_mode(m)]
    if bad:
        raise HarnessError(
            f"unknown mode(s) {', '.join(bad)}; use: {', '.join(AGENT_MODES)}, optionally +{'|'.join(SEARCHES)}"
        )
    wrong = [s for s in searches or [] if s not in SEARCHES]
    if wrong:
        raise HarnessError(f"unknown search(es) {', '.join(wrong)}; use: {', '.join(SEARCHES)}")
    modes = [m.removesuffix("+greedy") for m in modes] or ["pragma"]
    if searches:
        modes = [m if s == "greedy" else f"{m}+{s}" for m in modes for s in searches]
    return list(dict.fromkeys(modes))


def create_run(
    suite_dir: str,
    modes: list[str],
    ctx: Context,
    settings: RunSettings,
    *,
    overrides: str | None = None,
    patterns: list[str] | None = None,
    run_id: str | None = None,
    searches: list[str] | None = None,
) -> str:
    """Register a run (problems loaded and materialized now, so a bad suite fails before any work)."""
    modes = check_modes(modes, searches)
    problems = load_suite(suite_dir, overrides, patterns)
    run_id = run_id or new_run_id()
    settings.results_url = settings.results_url or store.default_results_url()
    settings.checkpoint_url = settings.checkpoint_url or store.default_checkpoint_url(run_id)
    db = ResultsDB(settings.results_url)
    if db.run(run_id):
        raise HarnessError(f"run {run_id!r} exists already; continue it with --resume {run_id}")
    now = time.time()
    # The mode sets these two (job.mode_settings); everything else is the run's for every mode.
    context = {k: v for k, v in context_to_dict(ctx).items() if k not in ("agent_mode", "search")}
    db.upsert(
        "eval_runs",
        {
            "run_id": run_id,
            "suite_dir": suite_dir,
            "overrides_path": overrides or "",
            "patterns_json": json.dumps(patterns or []),
            "modes_json": json.dumps(modes),
            "context_json": json.dumps(context),
            "settings_json": json.dumps(settings.__dict__),
            "machine_json": json.dumps(machine_fingerprint()),
            "status": "created",
            "created_at": now,
            "updated_at": now,
            "wall_s": 0.0,
        },
    )
    for p in problems:
        for mode in modes + ([TORCH_COMPILE] if settings.torch_compile else []):
            db.upsert(
                "eval_problems",
                {
                    "run_id": run_id,
                    "problem": p.name,
                    "mode": mode,
                    "category": p.category,
                    "path": p.path,
                    "sha256": p.sha256,
                    "status": "pending",
                },
            )
    return run_id


def load_run(run_id: str, results_url: str | None = None) -> tuple[ResultsDB, dict[str, Any]]:
    db = ResultsDB(results_url or store.default_results_url())
    row = db.run(run_id)
    if row is None:
        raise HarnessError(f"no evaluation run {run_id!r} in {db.url} (see: pragma eval runs)")
    return db, row


def plan(db: ResultsDB, run: dict[str, Any]) -> tuple[list[JobSpec], dict[tuple[str, str], float]]:
    """Jobs still to do, and the wall time already spent on each."""
    settings = loads(run["settings_json"], {})
    context = loads(run["context_json"], {})
    specs, prior = [], {}
    for row in db.problems(run["run_id"]):
        if row["status"] in DONE:
            continue
        problem = {
            "name": row["problem"],
            "path": row["path"],
            "source_path": row["path"],
            "category": row["category"],
            "sha256": row["sha256"],
            "overrides": {},
        }
        specs.append(
            JobSpec(
                run_id=run["run_id"],
                problem=problem,
                mode=row["mode"],
                context=context,
                results_url=settings["results_url"],
                checkpoint_url=settings["checkpoint_url"],
                out_dir=str(store.run_dir(run["run_id"])),
            )
        )
        prior[(row["problem"], row["mode"])] = float(row.get("wall_s") or 0.0)
    # Baselines last: they time eager PyTorch and should not compete with the agents for cores.
    specs.sort(key=lambda s: (s.mode == TORCH_COMPILE,))
    return specs, prior


class _Progress:
    """Rich progress: one overall bar and one line per running job (attempts so far, best)."""

    def __init__(self, console: Console, total: int, done: int, max_iterations: int):
        self.console, self.max_iterations = console, max_iterations
        # auto_refresh=False: no refresh thread, because workers are forked from this process
        # (a thread holding a lock at fork time would leave that lock held in the child).
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            auto_refresh=False,
            transient=False,
        )
        self.overall = self.bars.add_task("jobs", total=total, completed=done)
        self.tasks: dict[tuple[str, str], int] = {}
        # Where the console is no terminal (a log file, nohup, CI) the bars do not draw: each new
        # attempt gets a line instead, so a 20-minute job is not silent. Attempts seen per job.
        self.lines = not console.is_terminal
        self.seen: dict[tuple[str, str], int] = {}

    def __enter__(self) -> _Progress:
        self.bars.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bars.stop()

    def started(self, key: tuple[str, str], db: ResultsDB, run_id: str) -> None:
        total = 1 if key[1] == TORCH_COMPILE else self.max_iterations
        self.tasks[key] = self.bars.add_task(f"{key[0]} [{key[1]}]", total=total)
        if self.lines:  # a resumed job's earlier attempts were printed by the run that made them
            self.seen[key] = len(_attempts(db, run_id, key))

    def update(self, db: ResultsDB, run_id: str) -> None:
        if self.tasks:
            # "best" is the verifier's last accepted best, never the fastest measurement.
            rows = db.query(
                "SELECT problem, mode, COUNT(*) AS n, (SELECT b.speedup FROM eval_attempts b WHERE "
                "b.run_id=a.run_id AND b.problem=a.problem AND b.mode=a.mode AND b.accepted=1 "
                "ORDER BY b.iteration DESC LIMIT 1) AS best FROM eval_attempts a WHERE a.run_id=? "
                "GROUP BY a.run_id, a.problem, a.mode",
                (run_id,),
            )
            for r in rows:
                key = (r["problem"], r["mode"])
                if (task := self.tasks.get(key)) is not None:
                    best = f"best {r['best']:.2f}x" if r["best"] else "no correct kernel yet"
                    self.bars.update(task, completed=r["n"], description=f"{r['problem']} [{r['mode']}] {best}")
                    if r["n"] > self.seen.get(key, r["n"]):
                        self._print_new(key, db, run_id)
        self.bars.refresh()

    def _print_new(self, key: tuple[str, str], db: ResultsDB, run_id: str) -> None:
        if self.lines and key in self.seen:
            new = _attempts(db, run_id, key)[self.seen[key] :]
            for a in new:
                # markup=False: "[no-profile]" is text, not a rich style tag (a console with markup
                # on dropped it: "depthwise_conv2d  attempt 1").
                self.console.print(_attempt_line(key, a), soft_wrap=True, markup=False)
            self.seen[key] += len(new)

    def finished(self, key: tuple[str, str], status: str, db: ResultsDB, run_id: str) -> None:
        self._print_new(key, db, run_id)  # attempts made since the last poll
        self.seen.pop(key, None)
        if (task := self.tasks.pop(key, None)) is not None:
            self.bars.remove_task(task)
        self.bars.advance(self.overall)
        row = db.query(
            "SELECT best_speedup, solved, iterations, message FROM eval_problems WHERE run_id=? "
            "AND problem=? AND mode=?",
            (run_id, *key),
        )[0]
        what = f"best {row['best_speedup']:.3f}x" if row["solved"] else "no correct kernel"
        if status not in ("finished",):
            what += f" ({status}: {row['message'] or ''})"
        self.console.print(f"{key[0]} [{key[1]}]: {what} after {row['iterations'] or 0} attempt(s)", markup=False)


def _attempts(db: ResultsDB, run_id: str, key: tuple[str, str]) -> list[dict[str, Any]]:
    return db.query(
        "SELECT iteration, origin, status, accepted, speedup FROM eval_attempts WHERE run_id=? AND problem=? "
        "AND mode=? ORDER BY iteration",
        (run_id, *key),
    )


def _attempt_line(key: tuple[str, str], a: dict[str, Any]) -> str:
    """One attempt as a log line: '<problem> [<mode>] attempt 3 (refine): ok 1.234x, the new best'."""
    what = f"ok {a['speedup']:.3f}x" if a["status"] == "ok" else a["status"]
    return f"{key[0]} [{key[1]}] attempt {a['iteration']} ({a['origin']}): {what}" + (
        ", the new best" if a["accepted"] else ""
    )


def execute(
    run_id: str,
    console: Console,
    *,
    results_url: str | None = None,
    workers: int | None = None,
    ray_address: str | None = None,
    ray_runtime_env: dict[str, Any] | None = None,
) -> dict[str, int]:
    """Run every unfinished job of ``run_id``; returns counts of final statuses."""
    db, run = load_run(run_id, results_url)
    with lock.hold(lock.eval_run_name(run_id), what="evaluation run", label=run_id):  # before any write
        return _execute(db, run, console, workers=workers, ray_address=ray_address, ray_runtime_env=ray_runtime_env)


def ensure_not_running(run_id: str) -> None:
    """Raise RunLocked (one line naming the process) when a live process advances ``run_id``."""
    if (holder := lock.holder(lock.eval_run_name(run_id))) is not None:
        raise lock.RunLocked(lock.describe(run_id, holder, "evaluation run"))


def _execute(
    db: ResultsDB,
    run: dict[str, Any],
    console: Console,
    *,
    workers: int | None,
    ray_address: str | None,
    ray_runtime_env: dict[str, Any] | None,
) -> dict[str, int]:
    run_id = run["run_id"]
    settings = loads(run["settings_json"], {})
    specs, prior = plan(db, run)
    total = len(db.problems(run_id))
    max_iterations = int(loads(run["context_json"], {}).get("max_iterations", 15))
    db.set_run_status(run_id, "running")
    started = time.monotonic()
    counts: dict[str, int] = {}
    try:
        with _Progress(console, total, total - len(specs), max_iterations) as progress:
            address = ray_address if ray_address is not None else settings.get("ray_address")
            if address is not None:
                from pragma.eval.scale import run_on_ray

                counts = run_on_ray(
                    address,
                    specs,
                    prior,
                    float(settings["problem_budget_s"]),
                    db,
                    progress,
                    runtime_env=ray_runtime_env,
                )
            else:
                counts = _run_local(
                    specs,
                    prior,
                    workers or int(settings.get("workers", 2)),
                    float(settings["problem_budget_s"]),
                    db,
                    progress,
                )
    finally:
        unfinished = [r for r in db.problems(run_id) if r["status"] not in DONE]
        db.set_run_status(run_id, "finished" if not unfinished else "incomplete", time.monotonic() - started)
    return counts


def _run_local(
    specs: list[JobSpec],
    prior: dict[tuple[str, str], float],
    workers: int,
    budget_s: float,
    db: ResultsDB,
    progress: _Progress,
) -> dict[str, int]:
    pending = deque(specs)
    running: dict[tuple[str, str], supervise.Running] = {}
    counts: dict[str, int] = {}
    last_poll = 0.0
    try:
        while pending or running:
            while pending and len(running) < max(1, workers):
                spec = pending.popleft()
                running[spec.key] = supervise.start(spec, prior.get(spec.key, 0.0))
                progress.started(spec.key, db, spec.run_id)
            for key, job in list(running.items()):
                if job.exit_code() is not None:
                    job.reap()
                    status = supervise.settle(db, job)
                elif budget_s and job.prior_wall_s + job.elapsed_s() > budget_s:
                    supervise.kill_tree(job.pid)
                    job.reap()
                    status = supervise.settle(db, job, killed_for_budget=budget_s)
                else:
                    continue
                del running[key]
                counts[status] = counts.get(status, 0) + 1
                progress.finished(key, status, db, job.spec.run_id)
            if time.monotonic() - last_poll > 1.0:
                last_poll = time.monotonic()
                if specs:
                    progress.update(db, specs[0].run_id)
            time.sleep(POLL_S)
    except BaseException:
        # Ctrl-C or an error here: no orphans left computing; the jobs resume from checkpoints.
        for job in running.values():
            supervise.kill_tree(job.pid)
            job.reap()
            supervise.settle(db, job, interrupted=True)
        raise
    return counts
