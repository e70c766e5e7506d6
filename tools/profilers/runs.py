"""The profiler's sandboxed runs of a candidate, each over the kernel region only.

- counting: perf stat (with fallbacks: fewer events, then no perf) + per-call time + op cost;
- hot spots: perf record -e cpu-clock;
- simulation: callgrind on one thread, with an AVX2 rebuild on AVX-512 machines.
Each run gets a private directory (perf fifos, tool output) removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pragma.graph.context import Context, data_dir
from pragma.tools.launch import sandbox
from pragma.tools.profilers import callgrind, hotspots, perf_stat
from pragma.tools.verify import build_env, request_for


class RunDir:
    """A private directory for one profiled run: perf fifos and tool output files live here."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="pragma-prof-"))

    def fifos(self) -> tuple[str, str]:
        ctl, ack = self.path / "ctl", self.path / "ack"
        os.mkfifo(ctl)
        os.mkfifo(ack)
        return str(ctl), str(ack)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _sandboxed(
    problem_path: str,
    code: str,
    ctx: Context,
    run_dir: RunDir,
    *,
    prefix: list[str],
    updates: dict[str, Any],
    env: dict[str, str] | None = None,
    timeout_s: tuple[float, float] | None = None,
    memory_bytes: int | None = None,
    num_threads: int | None = None,
) -> sandbox.SandboxOutcome:
    req = {**request_for(problem_path, ctx, "profile"), **updates}
    compile_s, run_s = timeout_s or (ctx.compile_timeout_s, ctx.run_timeout_s)
    # The sandbox lets the worker write only to its own dir and to directories named in its
    # environment (Landlock); valgrind writes its output from inside the worker process.
    env = {**build_env(), **(env or {}), "PRAGMA_PROFILE_DIR": str(run_dir.path)}
    return sandbox.run_worker(
        req,
        compile_timeout_s=compile_s,
        run_timeout_s=run_s,
        memory_limit_bytes=memory_bytes or ctx.memory_limit_bytes,
        num_threads=num_threads or ctx.num_threads,
        extra_env=env,
        files={"candidate.py": code},
        command_prefix=prefix,
    )


def _has_pid_namespace() -> bool:
    namespaces = getattr(sandbox, "namespaces", None)
    return bool(namespaces and namespaces()[1])


def _why(outcome: sandbox.SandboxOutcome) -> str:
    if outcome.timed_out_phase:
        return f"timed out in phase '{outcome.timed_out_phase}'"
    lines = [ln for ln in outcome.output_tail.strip().splitlines() if ln.strip()]
    return (lines or [f"exit code {outcome.exit_code}"])[-1][:200]


def counting_run(
    problem_path: str, code: str, ctx: Context, events: list[str], groups: list[str], flush_bytes: int = 0
) -> tuple[dict[str, Any], dict[str, Any] | None, list[str]]:
    """(region result, parsed perf output or None, notes); falls back to fewer events, then no perf.

    ``flush_bytes`` > 0 asks the region for the cold-vs-warm micro-experiment, flushing the caches
    by reading that many bytes (tools/inside/region.py)."""
    notes: list[str] = []
    attempts: list[tuple[list[str], list[str]]] = []
    if perf_stat.perf_binary():
        attempts.append((events, groups))
        if events != perf_stat.default_events() or groups:
            attempts.append((perf_stat.default_events(), []))
    else:
        notes.append("perf not installed (Debian package linux-perf): no counters, no software events")
    attempts.append(([], []))
    for n, (ev, grp) in enumerate(attempts):
        run_dir = RunDir()
        try:
            prefix, updates = [], {"op_cost": True, "micro_flush_bytes": flush_bytes}
            if ev:
                ctl, ack = run_dir.fifos()
                out = str(run_dir.path / "perf.csv")
                prefix = perf_stat.command_prefix(ctl, ack, out, ev, grp)
                updates.update(perf_ctl_fifo=ctl, perf_ack_fifo=ack)
            outcome = _sandboxed(problem_path, code, ctx, run_dir, prefix=prefix, updates=updates)
            if outcome.result is None and ev:
                # perf itself refused (unknown event or group, permissions): try with less.
                dropped = sorted(set(ev) - set(perf_stat.default_events())) + grp
                what = f"extra events/groups {', '.join(dropped)}" if dropped and n == 0 else "perf stat"
                notes.append(f"perf stat could not run with {what} ({_why(outcome)}); retried without")
                continue
            csv = run_dir.path / "perf.csv"
            parsed = perf_stat.parse(csv.read_text()) if ev and csv.exists() else None
            result = outcome.result or {"status": "runtime_error", "message": _why(outcome)}
            result["phases_s"] = getattr(outcome, "phases_s", {})
            if parsed is not None:
                result["perf_events"], result["perf_groups"] = ev, grp
            return result, parsed, notes
        finally:
            run_dir.close()
    return {"status": "runtime_error", "message": "no run succeeded"}, None, notes


def hotspot_run(problem_path: str, code: str, ctx: Context) -> tuple[dict[str, Any] | None, str]:
    run_dir = RunDir()
    try:
        ctl, ack = run_dir.fifos()
        data = str(run_dir.path / "perf.data")
        prefix = hotspots.command_prefix(ctl, ack, data, mount_proc=_has_pid_namespace())
        outcome = _sandboxed(
            problem_path, code, ctx, run_dir, prefix=prefix, updates={"perf_ctl_fifo": ctl, "perf_ack_fifo": ack}
        )
        if outcome.result is None or outcome.result.get("status") != "ok":
            return None, f"perf record run failed: {_why(outcome)}"
        rep = hotspots.report(data)
        if rep["status"] != "ok":
            return None, rep["reason"]
        return hotspots.parse(rep["text"]), ""
    finally:
        run_dir.close()


def simulation_run(
    problem_path: str, code: str, ctx: Context, spec: dict[str, Any], build_kinds: list[str]
) -> tuple[dict[str, Any] | None, dict[str, Any], list[str]]:
    """(parsed callgrind output or None, facts about the run, notes)."""
    build_root = data_dir() / "build" / "callgrind"
    helper, why_not = callgrind.helper_library(build_root)
    notes = [] if helper else [f"callgrind instruments the whole process ({why_not}); slower"]
    flags, geometry, geo_notes = callgrind.geometry(spec.get("caches", []))
    notes += geo_notes
    env: dict[str, str] = {}
    if spec.get("simd") == "AVX-512":
        env["CXX"] = callgrind.no_avx512_compiler(build_root)
        env["TORCH_EXTENSIONS_DIR"] = str(data_dir() / "build" / "torch_extensions_no_avx512")
        notes.append("callgrind simulates an AVX2 build of the kernel (valgrind cannot execute AVX-512)")
    run_dir = RunDir()
    try:
        out = run_dir.path / "callgrind.out"
        toggles = callgrind.entry_toggles(build_kinds)
        facts: dict[str, Any] = {
            "geometry": geometry,
            "collect": f"inside {', '.join(toggles)}" if toggles else "whole region (no compiled kernel)",
        }
        if not helper and not toggles:
            return (
                None,
                facts,
                notes + ["callgrind cannot isolate the kernel: no compiled entry point and no client-request helper"],
            )
        prefix = callgrind.command_prefix(str(out), flags, has_helper=bool(helper), toggles=toggles)
        limit = ctx.callgrind_timeout_s
        # The region stops adding calls at half the run deadline (a call's simulated length is
        # only known once the warm call has run).
        # No uninstrumented warm-up: it costs a simulated call's time at nulgrind speed, and the
        # instrumented warm call (discarded) warms the caches anyway.
        updates = {
            "profile_calls": ctx.callgrind_calls,
            "warmup_calls": 0,
            "callgrind_collect_region": not toggles,
            "callgrind_budget_s": 0.5 * limit,
        }
        if helper:
            updates["callgrind_helper"] = helper
        outcome = _sandboxed(
            problem_path,
            code,
            ctx,
            run_dir,
            prefix=prefix,
            updates=updates,
            env=env,
            timeout_s=(limit, limit),
            memory_bytes=2 * ctx.memory_limit_bytes,
            num_threads=1,
        )
        facts["phases_s"] = getattr(outcome, "phases_s", {})
        if outcome.result is None or outcome.result.get("status") != "ok" or not out.exists():
            reason = callgrind.failure_reason(outcome.output_tail) or _why(outcome)
            return None, facts, notes + [f"callgrind run failed: {reason}"]
        res = outcome.result
        # Without the helper every kernel call was collected, caches cold at first.
        facts["calls"] = int(res.get("sim_calls", ctx.callgrind_calls))
        facts["warm_caches"] = bool(res.get("sim_warm_caches", False))
        if not facts["warm_caches"]:
            notes.append(
                f"callgrind counted {facts['calls']} call(s) starting from cold simulated caches"
                + (
                    f" (one call takes {res['sim_warm_call_s']:.0f} s under simulation)"
                    if "sim_warm_call_s" in res
                    else ""
                )
            )
        return callgrind.parse(out.read_text()), facts, notes
    finally:
        run_dir.close()
