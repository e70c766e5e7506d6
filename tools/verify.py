"""Verifier entry point: candidate source in, total ``VerifyResult`` dict out.

Every field is always present; numbers are finite floats (0.0 when not measured), never None
or inf, so the result can go straight into checkpointed state and JSON output.
"""

from __future__ import annotations

from typing import Any, Literal

from pragma.graph.context import Context, data_dir
from pragma.tools import sandbox

Status = Literal["ok", "compile_error", "runtime_error", "mismatch", "timeout", "rejected"]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


def build_env() -> dict[str, str]:
    """Cache directories shared by all sandboxes, so identical sources are compiled once."""
    root = data_dir() / "build"
    (root / "cext").mkdir(parents=True, exist_ok=True)
    (root / "torch_extensions").mkdir(parents=True, exist_ok=True)
    return {"PRAGMA_BUILD_DIR": str(root / "cext"), "TORCH_EXTENSIONS_DIR": str(root / "torch_extensions")}


def empty_result(status: Status, message: str, log_tail: str = "") -> dict[str, Any]:
    return {
        "status": status, "message": message, "log_tail": log_tail,
        "speedup": 0.0, "runtime_ms": 0.0, "ref_runtime_ms": 0.0,
        "runtime_min_ms": 0.0, "ref_runtime_min_ms": 0.0,
        "max_abs_diff": 0.0, "mean_abs_diff": 0.0, "num_threads": 0,
        "checks": [], "samples_ms": {"candidate": [], "reference": []},
        "sandbox": {}, "wall_s": 0.0, "builds": [],
    }


def request_for(problem_path: str, ctx: Context, mode: str) -> dict[str, Any]:
    return {
        "mode": mode, "problem_path": problem_path, "seed": ctx.seed, "num_threads": ctx.num_threads,
        "atol": ctx.atol, "rtol": ctx.rtol, "correctness_trials": ctx.correctness_trials,
        "warmup_calls": ctx.warmup_calls, "timed_calls": ctx.timed_calls,
        "profile_calls": ctx.profile_calls,
    }


def outcome_to_result(outcome: sandbox.SandboxOutcome, ctx: Context) -> dict[str, Any]:
    """Turn whatever happened in the sandbox into a total result."""
    if outcome.timed_out_phase:
        building = outcome.timed_out_phase in ("start", "load_problem", "build")
        limit = ctx.compile_timeout_s if building else ctx.run_timeout_s
        what = "building the candidate" if building else f"phase '{outcome.timed_out_phase}'"
        res = empty_result("timeout", f"{what} exceeded {limit:.0f} s; the process group was killed",
                           outcome.output_tail)
    elif outcome.result is None:
        how = f"died with {outcome.signal_name}" if outcome.signal_name else f"exited with code {outcome.exit_code}"
        res = empty_result("runtime_error", f"the candidate process {how} during phase '{outcome.last_phase}'",
                           outcome.output_tail)
    else:
        res = empty_result("runtime_error", "")
        res.update({k: v for k, v in outcome.result.items() if v is not None})
        if res["status"] not in STATUSES:
            res["status"] = "runtime_error"
        res["log_tail"] = (outcome.result.get("log_tail") or "") + outcome.output_tail[-2000:]
    res["sandbox"] = outcome.isolation
    res["wall_s"] = outcome.wall_s
    return res


def verify_candidate(problem_path: str, code: str, ctx: Context) -> dict[str, Any]:
    """Compile, check and time ``code`` against the problem's reference in the sandbox."""
    outcome = sandbox.run_worker(
        request_for(problem_path, ctx, "verify"),
        compile_timeout_s=ctx.compile_timeout_s, run_timeout_s=ctx.run_timeout_s,
        memory_limit_bytes=ctx.memory_limit_bytes, num_threads=ctx.num_threads,
        extra_env=build_env(), files={"candidate.py": code},
    )
    return outcome_to_result(outcome, ctx)
