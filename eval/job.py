"""One evaluation job: a problem x mode, run as a graph thread with the checkpointer.

A job starts its thread, or continues it from the last checkpoint when one exists (a resumed
run), and mirrors the thread's attempts into the results database after every node, so a job
killed at any moment has recorded every attempt the checkpointer holds (a resumed job re-records
them first). The ``torch.compile`` pseudo-mode measures that baseline instead of running agents.

Runs in a worker process: forked by the local harness, or started as
``python -m pragma.eval.job SPEC.json`` (Ray tasks). ``PRAGMA_EVAL_SETUP_HOOK=module:function``
names a function every job process calls first (e.g. to install a chat model, as tests do).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pragma.eval import baselines, store
from pragma.eval.db import ResultsDB
from pragma.graph import lineage
from pragma.graph.context import Context

log = logging.getLogger(__name__)
AGENT_MODES = ("pragma", "no-profile", "single-agent")
SEARCHES = ("greedy", "beam", "tree")
TORCH_COMPILE = "torch.compile"


def mode_settings(mode: str) -> dict[str, str]:
    """The Context fields a mode sets: 'pragma' is the agent mode with the greedy search,
    'pragma+beam' the same agents searching with beam (``pragma eval run --search``)."""
    agent, _, search = mode.partition("+")
    return {"agent_mode": agent, "search": search or "greedy"}


def is_mode(mode: str) -> bool:
    agent, plus, search = mode.partition("+")
    return agent in AGENT_MODES and (not plus or search in SEARCHES)


@dataclass
class JobSpec:
    run_id: str
    problem: dict[str, Any]  # SuiteProblem.to_dict()
    mode: str  # one of AGENT_MODES, optionally +SEARCH (e.g. pragma+beam), or TORCH_COMPILE
    context: dict[str, Any]  # Context fields, agent_mode and search excluded (the mode sets them)
    results_url: str
    checkpoint_url: str
    out_dir: str  # best kernels go to OUT_DIR/best/MODE/

    @property
    def key(self) -> tuple[str, str]:
        return self.problem["name"], self.mode

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls(**json.loads(text))


def run_setup_hook() -> None:
    hook = os.environ.get("PRAGMA_EVAL_SETUP_HOOK", "")
    if hook:
        module, _, func = hook.partition(":")
        getattr(importlib.import_module(module), func)()


def _ci(result: dict[str, Any]) -> tuple[float | None, float | None]:
    ci = result.get("speedup_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return float(ci[0]), float(ci[1])
    return None, None


def attempt_rows(spec: JobSpec, state: dict[str, Any], cis: dict[int, tuple]) -> list[dict[str, Any]]:
    """Rows for every attempt in ``state``, with the tokens of the LLM calls about that attempt
    (the Coder's call that wrote it and the Conductor/repair call that read its result)."""
    per_attempt = lineage.llm_by_attempt(state)
    rows = []
    for a in state.get("attempts", []):
        i = int(a["iteration"])
        low, high = cis.get(i) or _ci(a)
        llm = per_attempt.get(i, {})
        rows.append(
            {
                "run_id": spec.run_id,
                "problem": spec.problem["name"],
                "mode": spec.mode,
                "iteration": i,
                "origin": a.get("origin", ""),
                "status": a["status"],
                "speedup": float(a.get("speedup", 0.0)),
                # The verifier's acceptance as a new best (None from verifiers that do not decide).
                "accepted": None if a.get("is_new_best") is None else int(bool(a["is_new_best"])),
                "ci_low": low,
                "ci_high": high,
                "runtime_ms": float(a.get("runtime_ms", 0.0)),
                "ref_runtime_ms": float(a.get("ref_runtime_ms", 0.0)),
                "max_abs_diff": float(a.get("max_abs_diff", 0.0)),
                "input_tokens": llm.get("input_tokens", 0.0),
                "output_tokens": llm.get("output_tokens", 0.0),
                "cost_usd": llm.get("cost_usd", 0.0),
                "llm_wall_s": llm.get("wall_s", 0.0),
                "verify_wall_s": float(a.get("wall_s", 0.0)),
                "extra_batches": int(a.get("extra_batches", 0) or 0),
                "decision_changed": int(bool(a.get("sequential_decision_changed", False))),
                "message": (a.get("message") or "")[:2000],
                "recorded_at": time.time(),
            }
        )
    return rows


def _sync(db: ResultsDB, spec: JobSpec, state: dict[str, Any], cis: dict[int, tuple]) -> None:
    for row in attempt_rows(spec, state, cis):
        db.upsert("eval_attempts", row)


def _base_row(spec: JobSpec) -> dict[str, Any]:
    p = spec.problem
    return {
        "run_id": spec.run_id,
        "problem": p["name"],
        "mode": spec.mode,
        "category": p["category"],
        "path": p["path"],
        "sha256": p["sha256"],
    }


def _finish(db: ResultsDB, spec: JobSpec, ctx: Context, state: dict[str, Any], cis: dict[int, tuple]) -> None:
    from pragma.graph.routing import candidates_written, stop_reason
    from pragma.tools.export import standalone_source

    best, usage = state.get("best") or {}, state.get("usage") or {}
    low, high = cis.get(int(best.get("iteration", 0))) or (None, None)
    if best and low is None:  # a resumed job no longer sees the stream: take it from the attempt row
        rows = db.query(
            "SELECT ci_low, ci_high FROM eval_attempts WHERE run_id=? AND problem=? AND mode=? AND iteration=?",
            (spec.run_id, spec.problem["name"], spec.mode, best["iteration"]),
        )
        if rows:
            low, high = rows[0]["ci_low"], rows[0]["ci_high"]
    if best.get("code"):
        target = Path(spec.out_dir) / "best" / spec.mode / f"{spec.problem['name']}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(standalone_source(best["code"]))
    db.upsert(
        "eval_problems",
        {
            **_base_row(spec),
            "status": "finished",
            "solved": int(bool(best)),
            "best_speedup": float(best.get("speedup", 0.0)),
            "best_iteration": int(best.get("iteration", 0)),
            "best_ci_low": low,
            "best_ci_high": high,
            # the Coder's candidates (the tuner's children are counted apart: tune_s, tune_variants)
            "iterations": candidates_written(state),
            "input_tokens": usage.get("input_tokens", 0.0),
            "output_tokens": usage.get("output_tokens", 0.0),
            "cost_usd": usage.get("cost_usd", 0.0),
            "llm_calls": usage.get("llm_calls", 0.0),
            # the tuner's seconds and variants, apart from the LLM's (equal-budget comparisons)
            "tune_s": sum(float(r.get("spent_s", 0.0)) for r in state.get("sweeps", [])),
            "tune_variants": sum(len(r.get("trials", [])) for r in state.get("sweeps", [])),
            "stop_reason": stop_reason(state, ctx) or "",
            "message": "",
            "finished_at": time.time(),
        },
    )


def _run_agents(spec: JobSpec, db: ResultsDB) -> str:
    from pragma.graph.builder import compile_app

    ctx = Context(**{**spec.context, **mode_settings(spec.mode)})
    config = {"configurable": {"thread_id": store.thread_id(spec.run_id, spec.mode, spec.problem["name"])}}
    ref = baselines.reference_timing(spec.problem["path"], spec.problem["sha256"], ctx)
    if ref.get("status") == "ok":
        db.upsert("eval_problems", {**_base_row(spec), "ref_ms": ref["ref_ms"]})
    cis: dict[int, tuple] = {}
    with store.checkpointer(spec.checkpoint_url) as saver:
        app = compile_app(saver)
        snapshot = app.get_state(config)
        if snapshot.values:
            _sync(db, spec, snapshot.values, cis)  # what a killed predecessor may not have recorded
        if not snapshot.values or snapshot.next:
            graph_input = None if snapshot.values else {"problem": {"path": spec.problem["path"]}}
            for chunk in app.stream(graph_input, config, context=ctx, stream_mode="updates", durability="sync"):
                for node, update in chunk.items():
                    if node in ("verifier", "verify_next") and isinstance(update, dict) and update.get("attempts"):
                        result = update.get("verification") or {}
                        cis[int(update["attempts"][0]["iteration"])] = _ci(result)
                    if node in ("verifier", "verify_next", "repair", "conductor", "coder", "expand", "review", "tune"):
                        _sync(db, spec, app.get_state(config).values, cis)
        state = app.get_state(config).values
    _sync(db, spec, state, cis)
    _finish(db, spec, ctx, state, cis)
    return "finished"


def _run_torch_compile(spec: JobSpec, db: ResultsDB) -> str:
    ctx = Context(**spec.context)
    res = baselines.torch_compile_baseline(spec.problem["path"], spec.problem["sha256"], ctx)
    ok = res.get("status") == "ok"
    low, high = (res.get("speedup_ci") or [None, None]) if ok else (None, None)
    db.upsert(
        "eval_problems",
        {
            **_base_row(spec),
            "status": "finished",
            "solved": int(ok),
            "best_speedup": float(res.get("speedup", 0.0)),
            "best_iteration": 1 if ok else 0,
            "best_ci_low": low,
            "best_ci_high": high,
            "iterations": 1,
            "input_tokens": 0.0,
            "output_tokens": 0.0,
            "cost_usd": 0.0,
            "llm_calls": 0.0,
            "ref_ms": res.get("eager_ms"),
            "stop_reason": "baseline",
            "message": "" if ok else f"unavailable: {res.get('reason', res.get('status'))}",
            "finished_at": time.time(),
        },
    )
    return "finished"


LOCKED_EXIT = 75  # child_main's exit code when another live process advances the job's thread


def run_job(spec: JobSpec) -> str:
    """Run (or continue) one job to its end; returns the status recorded ('finished' or 'error'),
    or 'locked' when another live process advances the job's thread (then nothing is written)."""
    from pragma.graph.lock import RunLocked, hold

    try:
        with hold(store.thread_id(spec.run_id, spec.mode, spec.problem["name"]), what="evaluation job"):
            return _run_job_locked(spec)
    except RunLocked as exc:
        log.warning("%s", exc)
        return "locked"


def _run_job_locked(spec: JobSpec) -> str:
    db = ResultsDB(spec.results_url)
    db.upsert(
        "eval_problems",
        {
            **_base_row(spec),
            "status": "running",
            "started_at": time.time(),
            "thread_id": store.thread_id(spec.run_id, spec.mode, spec.problem["name"]),
            "worker": f"{socket.gethostname()}:{os.getpid()}",
        },
    )
    try:
        return _run_torch_compile(spec, db) if spec.mode == TORCH_COMPILE else _run_agents(spec, db)
    except Exception as exc:  # recorded for the report; --resume tries the job again
        line = " ".join(str(exc).split())[:500] or type(exc).__name__
        log.warning("%s [%s] failed: %s", spec.problem["name"], spec.mode, line, exc_info=True)
        db.upsert("eval_problems", {**_base_row(spec), "status": "error", "message": f"{type(exc).__name__}: {line}"})
        return "error"


def child_main(spec: JobSpec) -> int:
    """Entry of a worker process (forked or exec'd)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from pragma.tools.launch import startup

    with startup.imports():  # what every job loads (the graph, its nodes, torch), with no collection
        import pragma.graph.builder  # noqa: F401

        run_setup_hook()
    status = run_job(spec)
    return 0 if status == "finished" else LOCKED_EXIT if status == "locked" else 1


def _read_spec_file(path: Path) -> JobSpec:
    """The spec a supervisor wrote for this fresh interpreter, removed once read (a temp file per
    job: 400 of them had piled up in /tmp after a day of evaluations)."""
    spec = JobSpec.from_json(path.read_text())
    path.unlink(missing_ok=True)
    return spec


if __name__ == "__main__":
    sys.exit(child_main(_read_spec_file(Path(sys.argv[1]))))
