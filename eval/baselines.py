"""Reference timings and the torch.compile baseline, measured in the sandbox and cached per machine.

The cache (``DATA_DIR/eval/timings.sqlite``) is keyed by machine (CPU model, cores, SIMD level,
host name, torch version), the problem text's SHA-256 and the thread count, so a suite is timed
once per machine, and an edited or re-sized problem is timed again. Failures are cached too
(``unavailable: reason``): torch.compile that cannot work on a machine should not cost its
compile time on every run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import platform
import sqlite3
import statistics
import sys
import time
from typing import Any

import numpy as np

from pragma.eval.store import eval_dir
from pragma.graph.context import Context, data_dir
from pragma.tools import hardware
from pragma.tools.launch import sandbox, timing_slot

log = logging.getLogger(__name__)
CACHE_SCHEMA = """CREATE TABLE IF NOT EXISTS timings (
    machine TEXT, problem_sha TEXT, num_threads INTEGER, kind TEXT, result_json TEXT, measured_at REAL,
    PRIMARY KEY (machine, problem_sha, num_threads, kind))"""
REFERENCE_TIMED_CALLS = 30
# The cache kind of reference timings. ".v2": measured as the verifier measures the reference (issue
# 33: eval/timing_worker.py); figures cached under "reference" by the old loop are not reused.
REFERENCE_KIND = "reference.v2"
COMPILE_TIMED_CALLS = 30


def machine_fingerprint() -> dict[str, Any]:
    spec = hardware.cpu_spec()
    return {
        "host": platform.node(),
        "cpu": spec.get("model"),
        "cores": spec.get("cores"),
        "simd": spec.get("simd"),
        "torch": importlib.metadata.version("torch"),
    }


def machine_id() -> str:
    return hashlib.sha256(json.dumps(machine_fingerprint(), sort_keys=True).encode()).hexdigest()[:16]


def _cache() -> sqlite3.Connection:
    conn = sqlite3.connect(str(eval_dir() / "timings.sqlite"), timeout=120)
    conn.execute(CACHE_SCHEMA)
    return conn


def cached(problem_sha: str, num_threads: int, kind: str) -> dict[str, Any] | None:
    conn = _cache()
    try:
        row = conn.execute(
            "SELECT result_json FROM timings WHERE machine=? AND problem_sha=? AND num_threads=? AND kind=?",
            (machine_id(), problem_sha, num_threads, kind),
        ).fetchone()
    finally:
        conn.close()
    return json.loads(row[0]) if row else None


def _store(problem_sha: str, num_threads: int, kind: str, result: dict[str, Any]) -> None:
    conn = _cache()
    try:
        with conn:
            conn.execute(
                "INSERT OR REPLACE INTO timings VALUES (?,?,?,?,?,?)",
                (machine_id(), problem_sha, num_threads, kind, json.dumps(result), time.time()),
            )
    finally:
        conn.close()


def _sandboxed(problem_path: str, mode: str, ctx: Context, timed_calls: int) -> dict[str, Any]:
    # The worker holds the machine's timing slot around its timed loop; inside the sandbox it may
    # only open the slot's file read-only, so the file is created here first.
    timing_slot.ensure_file()
    inductor = data_dir() / "build" / "inductor"
    inductor.mkdir(parents=True, exist_ok=True)
    request = {
        "mode": mode,
        "problem_path": problem_path,
        "seed": ctx.seed,
        "num_threads": ctx.num_threads,
        "atol": ctx.atol,
        "rtol": ctx.rtol,
        "warmup_calls": max(3, ctx.warmup_calls),
        "warmup_s": ctx.warmup_s,
        "timed_calls": timed_calls,
    }
    outcome = sandbox.run_worker(
        request,
        compile_timeout_s=ctx.compile_timeout_s,
        run_timeout_s=ctx.run_timeout_s,
        memory_limit_bytes=ctx.memory_limit_bytes,
        num_threads=ctx.num_threads,
        # Inductor's cache outlives the sandbox; one compile thread: no worker pool on 2 cores.
        extra_env={"TORCHINDUCTOR_CACHE_DIR": str(inductor), "TORCHINDUCTOR_COMPILE_THREADS": "1"},
        command_prefix=[sys.executable, "-m", "pragma.eval.timing_worker"],
    )
    if outcome.timed_out_phase:
        return {"status": "unavailable", "reason": f"timed out in phase {outcome.timed_out_phase}"}
    if outcome.result is None:
        why = outcome.signal_name or f"exit code {outcome.exit_code}"
        tail = (outcome.output_tail.strip().splitlines() or [""])[-1][:200]
        return {"status": "unavailable", "reason": f"the timing process died ({why}): {tail}"}
    return outcome.result


def ratio_ci(num_ms: list[float], den_ms: list[float], resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of median(num)/median(den) over paired rounds."""
    a, b = np.asarray(num_ms), np.asarray(den_ms)
    n = min(len(a), len(b))
    if n == 0:
        return 0.0, 0.0
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    ratios = np.median(a[:n][idx], axis=1) / np.median(b[:n][idx], axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def reference_timing(problem_path: str, problem_sha: str, ctx: Context) -> dict[str, Any]:
    """{"status": "ok", "ref_ms": median} (cached per machine), or a status with a reason."""
    if (hit := cached(problem_sha, ctx.num_threads, REFERENCE_KIND)) is not None:
        return {**hit, "cached": True}
    result = _sandboxed(problem_path, "reference", ctx, REFERENCE_TIMED_CALLS)
    result = {k: v for k, v in result.items() if k != "log_tail"}
    if result.get("status") == "ok":
        _store(problem_sha, ctx.num_threads, REFERENCE_KIND, result)
    return {**result, "cached": False}


def torch_compile_baseline(problem_path: str, problem_sha: str, ctx: Context) -> dict[str, Any]:
    """torch.compile vs eager on this machine: speedup (median ratio) with a CI, or why not."""
    if (hit := cached(problem_sha, ctx.num_threads, "torch.compile")) is not None:
        return {**hit, "cached": True}
    started = time.monotonic()
    raw = _sandboxed(problem_path, "torch_compile", ctx, COMPILE_TIMED_CALLS)
    if raw.get("status") == "ok":
        eager, fast = raw["eager_samples_ms"], raw["compiled_samples_ms"]
        result = {
            "status": "ok",
            "eager_ms": statistics.median(eager),
            "compiled_ms": statistics.median(fast),
            "speedup": statistics.median(eager) / statistics.median(fast),
            "speedup_ci": list(ratio_ci(eager, fast)),
        }
    else:
        result = {"status": raw.get("status", "unavailable"), "reason": raw.get("reason", "unknown")}
        log.info("torch.compile baseline for %s: %s: %s", problem_path, result["status"], result["reason"])
    result["measure_s"] = round(time.monotonic() - started, 1)
    if result["status"] != "error":  # a problem error may be transient (memory); do not cache it
        _store(problem_sha, ctx.num_threads, "torch.compile", result)
    return {**result, "cached": False}
