"""Verifier entry point: candidate source in, total ``VerifyResult`` out (tools/wire/verification.py).

Every field is always present; numbers are finite floats (0.0 when not measured), never None
or inf, so the result can go straight into checkpointed state and JSON output.

Pipeline: static anti-cheat rules (no code runs) -> sandboxed worker (build, correctness trials
with runtime rules, interleaved timing of reference [, current best] and candidate, held-out
re-check) -> statistics (medians, bootstrap CIs) -> physical plausibility -> acceptance as a new
historical best. The held-out seed is drawn here for every verification and never returned.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, cast

from pragma.graph.context import Context, data_dir
from pragma.tools import device
from pragma.tools.judging import acceptance, anticheat, physical, stats
from pragma.tools.launch import sandbox, timing_slot
from pragma.tools.wire.verification import Check, Mode, Status, VerifyRequest, VerifyResult

STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


def build_env() -> dict[str, str]:
    """Cache directories shared by all sandboxes, so identical sources are compiled once."""
    root = data_dir() / "build"
    (root / "cext").mkdir(parents=True, exist_ok=True)
    (root / "torch_extensions").mkdir(parents=True, exist_ok=True)
    return {"PRAGMA_BUILD_DIR": str(root / "cext"), "TORCH_EXTENSIONS_DIR": str(root / "torch_extensions")}


def empty_result(status: Status, message: str, log_tail: str = "") -> VerifyResult:
    """The whole result with nothing measured: every outcome starts here and fills in what it knows."""
    return {
        "status": status,
        "message": message,
        "log_tail": log_tail,
        "speedup": 0.0,
        "speedup_ci": [0.0, 0.0],
        "runtime_ms": 0.0,
        "ref_runtime_ms": 0.0,
        "runtime_min_ms": 0.0,
        "ref_runtime_min_ms": 0.0,
        "max_abs_diff": 0.0,
        "mean_abs_diff": 0.0,
        "num_threads": 0,
        "checks": [],
        "samples_ms": {"candidate": [], "reference": []},
        "sandbox": {},
        "wall_s": 0.0,
        "builds": [],
        "phases_s": {},
        "is_suspicious": False,
        "traffic_bytes": 0,
        "bandwidth_bytes_per_s": 0.0,
        "min_time_bound_ms": 0.0,
        "holdout_ok": False,
        "is_new_best": False,
        "acceptance": "",
        "best_runtime_ms": 0.0,
        "speedup_vs_best": 0.0,
        "speedup_vs_best_ci": [0.0, 0.0],
        "speedup_of_minimums": 0.0,
        "cpu_ratio": {},
        "warmup_rounds": 0,
        "warmup_elapsed_s": 0.0,
        "null_round_trip_ms": 0.0,
        "timing_slot_waited_s": 0.0,
        "checks_slot_waited_s": 0.0,
        "audited_calls": [],
        "anon_huge_page_share": {},
        "audit_escape_at_quarter": 1.0,
        "audit_ms_total": 0.0,
        "recorded_calls": [],
        "fresh_inputs": "",
        "fresh_inputs_ms_per_round": 0.0,
        "spot_reads": "",
        "spot_read_ms_per_call": 0.0,
        "input_placement": "",
        "candidate_timed_in": "",
        "confirmation": {},
        "extra_batches": 0,
        "sequential_log": [],
        "timed_rounds_stop": "",
        "sequential_decision_changed": False,
        "flops": 0,
        "min_compute_time_bound_ms": 0.0,
        "stress": {"used": [], "skipped": []},
    }


def request_for(problem_path: str, ctx: Context, mode: Mode) -> VerifyRequest:
    """The whole request for a sandboxed process, every field from ``ctx``: the judge and the worker
    read these fields without defaults of their own, so ``Context`` is the one place defaults live."""
    on_device = device.sandbox_request(ctx)
    return {
        "mode": mode,
        "backend": ctx.backend,
        # Absolute: the sandbox runs in its own working directory (a relative path failed there).
        "problem_path": str(Path(problem_path).resolve()),
        "seed": ctx.seed,
        "num_threads": ctx.num_threads,
        "atol": ctx.atol,
        "rtol": ctx.rtol,
        "correctness_trials": ctx.correctness_trials,
        "warmup_calls": ctx.warmup_calls,
        "warmup_s": ctx.warmup_s,
        "timed_calls": ctx.timed_calls,
        "timing_ci_pct": ctx.timing_ci_pct,
        "profile_calls": ctx.profile_calls,
        "fresh_inputs": ctx.fresh_inputs,
        "acceptance_margin": ctx.acceptance_margin,
        "device": on_device["device"],
        "device_note": on_device.get("device_note", ""),
    }


def outcome_to_result(outcome: sandbox.SandboxOutcome, ctx: Context) -> VerifyResult:
    """Turn whatever happened in the sandbox into a total result."""
    if outcome.timed_out_phase:
        building = outcome.timed_out_phase in sandbox.BUILD_PHASES
        limit = ctx.compile_timeout_s if building else ctx.run_timeout_s
        what = "building the candidate" if building else f"phase '{outcome.timed_out_phase}'"
        res = empty_result(
            "timeout", f"{what} exceeded {limit:.0f} s; the process group was killed", outcome.output_tail
        )
    elif outcome.result is None:
        how = f"died with {outcome.signal_name}" if outcome.signal_name else f"exited with code {outcome.exit_code}"
        res = empty_result(
            "runtime_error",
            f"the candidate process {how} during phase '{outcome.last_phase}'" + _signal_hint(outcome.signal_name, ctx),
            outcome.output_tail,
        )
        if outcome.signal_name in ("SIGXCPU", "SIGXFSZ"):
            res["checks"] = [
                {
                    "rule": "memory_limit" if outcome.signal_name == "SIGXFSZ" else "thread_budget",
                    "verdict": "fail",
                    "detail": res["message"],
                }
            ]
    else:
        res = empty_result("runtime_error", "")
        # The judge's JSON is this contract's (written by tools/judging/session.py).
        res.update(cast(VerifyResult, {k: v for k, v in outcome.result.items() if v is not None and k != "isolation"}))
        if res["status"] not in STATUSES:
            res["status"] = "runtime_error"
        res["log_tail"] = (outcome.result.get("log_tail") or "") + outcome.output_tail[-2000:]
    res["sandbox"] = outcome.isolation
    if unconfined := _unconfined(outcome.isolation):
        res["message"] = f"{res['message']}; {unconfined}" if res["message"] else unconfined
    res["wall_s"] = outcome.wall_s
    res["phases_s"] = dict(outcome.phases_s)
    return res


def _unconfined(isolation: dict[str, str]) -> str:
    """One line when none of the isolating layers applied (no namespace, no Landlock)."""
    isolating = [isolation.get("network", ""), isolation.get("filesystem", ""), isolation.get("proc", "")]
    has_pid_ns = "PID namespace" in isolation.get("processes", "")
    if has_pid_ns or any(layer and not layer.startswith(("none", "unknown")) for layer in isolating):
        return ""
    return (
        "UNCONFINED: no namespace and no Landlock here; the candidate ran with this user's access "
        "(environment allowlist and rlimits only)"
    )


def _signal_hint(signal_name: str | None, ctx: Context) -> str:
    return {
        "SIGXCPU": " (CPU-time limit of the sandbox)",
        "SIGXFSZ": f" (file-size limit of {sandbox.FILE_SIZE_LIMIT_BYTES} bytes: too much output?)",
        "SIGKILL": f" (killed: out of memory? the address-space limit is {ctx.memory_limit_bytes} bytes)",
    }.get(signal_name or "", "")


def _finite(value: Any) -> Any:
    """JSON-native copy with every non-finite float replaced by 0.0 (the result is total)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else 0.0
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


# The tests (and older callers) name the decision by this name; the rule lives in tools/judging/acceptance.py.
_accept = acceptance.decide


def verify_candidate(
    problem_path: str, code: str, ctx: Context, *, best_code: str | None = None, best_speedup: float = 0.0
) -> VerifyResult:
    """Compile, check and time ``code`` against the problem's reference in the sandbox.

    With ``best_code`` (the current historical best) the best is timed in the same interleaved
    rounds, and ``is_new_best`` follows the acceptance rule (tools/judging/acceptance.py).
    """
    from pragma.tools.export import unwrap

    code = unwrap(code)  # an exported best.py is verified as the kernel it wraps
    t0 = time.monotonic()
    try:
        problem_source = Path(problem_path).read_text()
    except (OSError, UnicodeDecodeError):
        problem_source = ""
    if ctx.static_checks:
        checks = anticheat.static_checks(code, problem_source, ctx.backend)
    else:
        checks = [{"rule": "static_checks", "verdict": "skip", "detail": "turned off (static_checks=false)"}]
    static_s = time.monotonic() - t0
    if failure := anticheat.first_failure(checks):
        res = empty_result("rejected", f"rule {failure['rule']}: {failure['detail']}")
        res["checks"] = cast(list[Check], checks)
        res["sandbox"] = {"static": "rejected before any code ran"}
        res["phases_s"] = {"static_checks": round(static_s, 4)}
        res["wall_s"] = static_s
        res["acceptance"] = "not accepted: status rejected"
        return cast(VerifyResult, _finite(res))
    request = request_for(problem_path, ctx, "verify")
    # Every input seed (held-out included) is drawn by the judge inside the sandbox, after it forked
    # the runners: none is in this request. The judge holds the machine's timing slot around its
    # timed rounds; the sandbox may open the lock file only read-only, so it is created here.
    timing_slot.ensure_file()
    files = {"candidate.py": code}
    if best_code:
        files["best.py"] = best_code
    outcome = sandbox.run_worker(
        request,
        compile_timeout_s=ctx.compile_timeout_s,
        run_timeout_s=ctx.run_timeout_s,
        memory_limit_bytes=device.memory_limit_bytes(ctx),
        num_threads=ctx.num_threads,
        extra_env={**build_env(), **device.sandbox_env(ctx)},
        files=files,
        prestarted=ctx.prestarted_judge,
    )
    res = outcome_to_result(outcome, ctx)
    res["checks"] = cast(list[Check], checks) + list(res.get("checks") or [])
    t_stats = time.monotonic()
    if res["status"] == "ok":
        res.update(cast(VerifyResult, stats.summarize(res["samples_ms"])))
        # The candidate's median: its minimum is too noisy on a loaded machine (see physical.py).
        plaus = device.plausibility(ctx, int(res["traffic_bytes"]), res["runtime_ms"], res["ref_runtime_min_ms"])
        compute = (
            physical.compute_bound(int(res.get("flops") or 0), res["runtime_ms"], ctx.num_threads)
            if ctx.backend == "cpu"
            else None
        )
        if compute is not None and compute["is_suspicious"]:
            plaus = {
                **plaus,
                "verdict": "warn",
                "is_suspicious": True,
                "detail": f"{compute['detail']} | memory roof: {plaus['detail']}",
            }
        elif compute is not None:
            plaus = {**plaus, "detail": f"{plaus['detail']} | compute roof: {compute['detail']}"}
        res["min_compute_time_bound_ms"] = compute["min_time_bound_ms"] if compute else 0.0
        res["checks"].append(cast(Check, {k: plaus[k] for k in ("rule", "verdict", "detail")}))
        res["is_suspicious"] = plaus["is_suspicious"]
        res["bandwidth_bytes_per_s"] = plaus["bandwidth_bytes_per_s"]
        res["min_time_bound_ms"] = plaus["min_time_bound_ms"]
        low, high = res["speedup_ci"]
        res["message"] = f"{res['message']}; speedup {res['speedup']:.3f}x (95% CI {low:.3f}-{high:.3f})" + (
            "; SUSPICIOUS: faster than the machine's roofs allow (see speedup_plausible)"
            if res["is_suspicious"]
            else ""
        )
    res["is_new_best"], res["acceptance"] = acceptance.decide(res, bool(best_code), best_speedup, ctx.acceptance_margin)
    res["phases_s"] = {
        "static_checks": round(static_s, 4),
        **res["phases_s"],
        "statistics": round(time.monotonic() - t_stats, 4),
    }
    return cast(VerifyResult, _finite(res))


def prebuild_kernel(problem_path: str, cpp: str, entry: str, ctx: Context) -> str:
    """Compile a kernel-format candidate's C++ into the build cache, in the sandbox, the way its
    generated module will (tools/glue.py: ``load_cpp(CPP_SOURCE, name=entry)``, the same string), so that its
    verification finds the build. Why: a search round's candidates then compile in parallel while
    their verifications run one after another. Returns the build's status; its errors are the
    verification's to report. CPU backend only ('skipped' otherwise)."""
    if ctx.backend != "cpu":
        return "skipped"
    from pragma.tools.glue import compiled_source

    req = {**request_for(problem_path, ctx, "build"), "cpp_source": compiled_source(cpp), "cpp_name": entry}
    return _build(req, ctx)


def _build(req: dict[str, Any], ctx: Context) -> str:
    """One sandboxed build worker outside a verification; its status ('ok' or why not).

    It takes the machine's timing slot shared, as a verification's own build does: g++ streams
    through the cache and memory a timed kernel on the other core reads (the tuner builds a
    dimension's variants in parallel beside other jobs' timed rounds). A job waiting to time waits
    for the builds already running (seconds) and none starts meanwhile (the turnstile)."""
    with timing_slot.share("build outside a verification"):
        outcome = sandbox.run_worker(
            req,
            compile_timeout_s=ctx.compile_timeout_s,
            run_timeout_s=ctx.run_timeout_s,
            memory_limit_bytes=ctx.memory_limit_bytes,
            num_threads=ctx.num_threads,
            extra_env=build_env(),
        )
    return str((outcome.result or {}).get("status") or f"failed ({outcome.last_phase})")


def prebuild(problem_path: str, code: str, ctx: Context) -> str:
    """Compile every C++ source ``code``'s load_cpp calls will hash (tools/tunables.build_requests)
    into the build cache, in sandboxed build workers; 'ok' or the first failure. The tuner's sweep and
    the profiler's vector-width experiment build their variants here, in parallel, before timing."""
    from pragma.tools import tunables

    for job in tunables.build_requests(code):
        req = {
            **request_for(problem_path, ctx, "build"),
            "cpp_source": job["source"],
            "cpp_name": job["name"],
            "cpp_flags": job["flags"],
        }
        status = _build(req, ctx)
        if status != "ok":
            return status
    return "ok"
