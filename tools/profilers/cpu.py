"""CPU profile of a verified candidate: perf over the kernel region, vectorization report, instruction mix.

Confidence ranks the evidence: hardware-counters > static (compiler/binary) > timing-only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from pragma.graph.context import Context
from pragma.tools import sandbox
from pragma.tools.profilers import bottleneck, instruction_mix, perf_stat, vectorization
from pragma.tools.verify import build_env, request_for


def _run_region(problem_path: str, code: str, ctx: Context, events: list[str],
                use_perf: bool = True) -> tuple[dict, dict, list]:
    """Run the kernel region in the sandbox, under perf stat when perf exists."""
    notes: list[str] = []
    fifo_dir = Path(tempfile.mkdtemp(prefix="pragma-perf-"))
    req = request_for(problem_path, ctx, "profile")
    prefix: list[str] = []
    perf_out = fifo_dir / "perf.csv"
    if use_perf and perf_stat.perf_binary():
        ctl, ack = fifo_dir / "ctl", fifo_dir / "ack"
        os.mkfifo(ctl)
        os.mkfifo(ack)
        req.update(perf_ctl_fifo=str(ctl), perf_ack_fifo=str(ack))
        prefix = perf_stat.command_prefix(str(ctl), str(ack), str(perf_out), events)
    elif use_perf:
        notes.append("perf not installed (Debian package linux-perf): no counters, timing only")
    outcome = sandbox.run_worker(
        req, compile_timeout_s=ctx.compile_timeout_s, run_timeout_s=ctx.run_timeout_s,
        memory_limit_bytes=ctx.memory_limit_bytes, num_threads=ctx.num_threads,
        extra_env=build_env(), files={"candidate.py": code}, command_prefix=prefix,
    )
    perf_metrics = perf_stat.parse(perf_out.read_text()) if perf_out.exists() else {}
    for p in fifo_dir.iterdir():
        p.unlink()
    fifo_dir.rmdir()
    if outcome.result is None and prefix:
        # perf itself refused (unknown event, paranoid setting): measure without it, say so.
        region, _, more = _run_region(problem_path, code, ctx, events, use_perf=False)
        why = (outcome.output_tail.strip().splitlines() or ["no output"])[-1][:200]
        return region, {}, notes + [f"perf stat could not run ({why}); timing only"] + more
    return outcome.result or {"status": "runtime_error", "message": outcome.output_tail[-500:]}, perf_metrics, notes


def profile_candidate(problem_path: str, code: str, ctx: Context,
                      extra_events: list[str] | None = None) -> dict[str, Any]:
    events = perf_stat.default_events(extra_events)
    region, perf_metrics, notes = _run_region(problem_path, code, ctx, events)
    if region.get("status") != "ok":
        return {"status": "unavailable", "reason": f"profiled run failed: {region.get('message', '')[:300]}",
                "sources": [], "confidence": "none", "metrics": {}, "bottleneck": "unknown", "notes": notes}
    metrics: dict[str, dict[str, Any]] = {
        "per_call_ms": {"value": region["per_call_ms"], "unit": "ms", "source": "wall clock (profiled region)"},
    }
    sources = ["wall clock"]
    unavailable = []
    for name, m in perf_metrics.items():
        if "value" in m:
            metrics[name] = m
        else:
            unavailable.append(name)
    if perf_metrics:
        sources.append("perf stat (kernel region)")
    if unavailable:
        notes.append(f"perf counters not supported on this machine: {', '.join(unavailable)}")
    vect = mix = None
    builds = region.get("builds") or []
    if builds:
        build = builds[-1]
        # A load_inline source includes torch's headers: its report costs a full compile (~40 s).
        flags = vectorization.torch_extension_flags() if build["kind"] == "load_inline" else []
        v = vectorization.collect(build["source_path"], extra_flags=flags)
        if v["status"] == "ok":
            vect = vectorization.parse(v["text"], build["source_path"])
            sources.append("gcc vectorization report")
            metrics["vectorized_loops"] = {"value": vect["vectorized_loops"], "unit": "count", "source": "gcc -fopt-info-vec"}
            metrics["missed_loops"] = {"value": vect["missed_loops"], "unit": "count", "source": "gcc -fopt-info-vec"}
        else:
            notes.append(f"vectorization report unavailable: {v['reason']}")
        i = instruction_mix.collect(build["so_path"])
        if i["status"] == "ok":
            mix = instruction_mix.parse(i["text"])
            sources.append("objdump instruction mix")
            for key in ("packed_fp", "scalar_fp", "fma", "widest_vector_bits"):
                unit = "bits" if key.endswith("bits") else "static count"
                metrics[key] = {"value": mix[key], "unit": unit, "source": "objdump (static)"}
        else:
            notes.append(f"instruction mix unavailable: {i['reason']}")
    else:
        notes.append("no compiled kernel found (candidate built nothing through pragma_cext or load_inline)")
    label, why = bottleneck.classify_cpu(metrics, vect, mix)
    confidence = ("hardware-counters" if perf_stat.has_hardware_counters(perf_metrics)
                  else "static" if (vect or mix) else "timing-only")
    return {"status": "ok", "sources": sources, "confidence": confidence, "metrics": metrics,
            "bottleneck": label, "bottleneck_evidence": why, "notes": notes,
            "vectorization": vect or {}, "instruction_mix": mix or {}}


def render_profile(profile: dict[str, Any]) -> str:
    if profile.get("status") != "ok":
        return f"profile unavailable: {profile.get('reason', '')}"
    lines = [f"sources: {', '.join(profile['sources'])}; confidence: {profile['confidence']}",
             f"bottleneck: {profile['bottleneck']} ({profile.get('bottleneck_evidence', '')})"]
    for name, m in profile["metrics"].items():
        lines.append(f"- {name}: {m['value']:.4g} {m['unit']} [{m['source']}]")
    if profile.get("vectorization"):
        lines.append(vectorization.render(profile["vectorization"]))
    if profile.get("instruction_mix"):
        lines.append(instruction_mix.render(profile["instruction_mix"]))
    lines += [f"note: {n}" for n in profile.get("notes", [])]
    return "\n".join(lines)
