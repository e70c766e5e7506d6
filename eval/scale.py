"""The harness on a Ray cluster: one Ray task per job (problem x mode), resources declared.

Each task runs ``supervise.run_supervised`` on whichever node Ray picks: the job starts there as
``python -m pragma.eval.job`` with the same hard budget as local workers (the whole process tree
is killed past it). What every node must see:

- the problem files (the suite directory and, for overridden problems, ``PRAGMA_DATA_DIR``) at
  the same paths: a shared filesystem, or a ``working_dir`` runtime env;
- the results database: a shared SQLite path or ``--results-db postgresql://...``;
- the checkpointer: ``--checkpoint-db postgresql://...`` (a SQLite file only works on one node).

Settings reach the tasks as environment variables (``PRAGMA_*``, ``OPENAI_*``, ``PYTHONPATH``),
so the LLM endpoint and ``PRAGMA_EVAL_SETUP_HOOK`` apply on every node. ``--ray local`` starts a
Ray instance on this machine (what the test does).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from pragma.eval import supervise
from pragma.eval.db import ResultsDB
from pragma.eval.errors import HarnessError
from pragma.eval.job import JobSpec

log = logging.getLogger(__name__)
FORWARDED_ENV_PREFIXES = ("PRAGMA_", "OPENAI_")


def task_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def task_resources(context: dict[str, Any]) -> dict[str, float]:
    """What one job occupies: its kernel threads on CPU, plus one GPU for the GPU backend."""
    cpus = max(1, int(context.get("num_threads", 1)))
    return {"num_cpus": cpus, "num_gpus": 1 if context.get("backend") == "gpu" else 0}


def _task(spec_json: str, budget_s: float, prior_wall_s: float) -> str:
    logging.basicConfig(level=logging.WARNING)
    return supervise.run_supervised(JobSpec.from_json(spec_json), budget_s, prior_wall_s)


def _connect(ray: Any, address: str, runtime_env: dict[str, Any]) -> None:
    kwargs = {
        "runtime_env": runtime_env,
        "ignore_reinit_error": True,
        "log_to_driver": False,
        "include_dashboard": False,
    }
    if address == "local":
        ray.init(**kwargs)  # a fresh single-node instance, stopped with this process
    else:
        kwargs.pop("include_dashboard")
        ray.init(address=address, **kwargs)


def run_on_ray(
    address: str,
    specs: list[JobSpec],
    prior: dict[tuple[str, str], float],
    budget_s: float,
    db: ResultsDB,
    progress: Any,
    runtime_env: dict[str, Any] | None = None,
) -> dict[str, int]:
    try:
        import ray
    except ImportError:
        raise HarnessError("--ray needs the scale extra: pip install 'pragma-kernels[scale]'") from None
    env = {"env_vars": task_env(), **(runtime_env or {})}
    _connect(ray, address, env)
    counts: dict[str, int] = {}
    pending: dict[Any, JobSpec] = {}
    try:
        for spec in specs:
            options = task_resources(spec.context)
            remote = ray.remote(_task).options(max_retries=0, **options)
            pending[remote.remote(spec.to_json(), budget_s, prior.get(spec.key, 0.0))] = spec
            progress.started(spec.key, db, spec.run_id)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in done:
                spec = pending.pop(ref)
                try:
                    status = ray.get(ref)
                except Exception as exc:  # the task itself died (node lost, worker killed)
                    status = "error"
                    db.upsert(
                        "eval_problems",
                        {
                            "run_id": spec.run_id,
                            "problem": spec.key[0],
                            "mode": spec.key[1],
                            "status": "error",
                            "message": f"Ray task failed: {str(exc)[:300]}",
                        },
                    )
                counts[status] = counts.get(status, 0) + 1
                progress.finished(spec.key, status, db, spec.run_id)
            if specs:
                progress.update(db, specs[0].run_id)
    except BaseException:
        for ref, spec in pending.items():
            ray.cancel(ref, force=True)
            db.upsert(
                "eval_problems",
                {
                    "run_id": spec.run_id,
                    "problem": spec.key[0],
                    "mode": spec.key[1],
                    "status": "interrupted",
                    "message": "the harness was interrupted",
                },
            )
        raise
    finally:
        if address == "local":
            ray.shutdown()
    return counts
