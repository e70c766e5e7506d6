"""GPU profile of a verified candidate (backend=gpu): the best evidence this machine allows.

Mirrors cpu.py. One sandboxed run of the candidate under Nsight Compute (``ncu.py``) over a
cudaProfilerStart/Stop range, after a CUDA-event timing of the call; then the roofline of the
operation (reference FLOPs and compulsory bytes) against the device's nominal peaks
(``gpu_spec.py``), the bottleneck in the shared vocabulary (``bottleneck.py``) and, in the
profiler node, the same profile diff as on the CPU (``diff.py``).

Fallbacks, each stated in the profile: ncu missing, counters not permitted (ERR_NVGPUCTRPERM) or
an ncu run that fails -> kernel timings from torch.profiler (CUPTI activity tracing needs no
counter permission), confidence ``timing-only``. Without a CUDA device (the Triton interpreter on
a CPU) there is nothing to profile: ``{"status": "unavailable", ...}``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pragma.graph.context import Context
from pragma.tools import gpu_spec
from pragma.tools.device import BackendUnavailable, device_for, memory_limit_bytes, sandbox_env
from pragma.tools.launch import sandbox
from pragma.tools.profilers import ncu
from pragma.tools.profilers import roofline as cpu_roofline
from pragma.tools.profilers.bottleneck import VOCABULARY, roofline_side
from pragma.tools.profilers.metrics import metric
from pragma.tools.verify import build_env, request_for

log = logging.getLogger(__name__)

ROOFLINE_SOURCE = "roofline (reference FLOPs/bytes, nominal GPU peaks)"
TIMING_SOURCE = "CUDA events (L2 flushed, device synchronized)"
TORCH_SOURCE = "torch.profiler kernel timing (CUPTI, no counters)"
# Thresholds of the GPU signals (percent of peak unless named otherwise).
SOL_HIGH_PCT = 60.0  # a unit this busy is the limiter
SOL_LOW_PCT = 40.0  # both below: neither memory nor compute is saturated -> latency
KERNEL_SHARE_LOW = 0.5  # kernels busy less than half of the call: launch/Python overhead dominates
LOW_OCCUPANCY_PCT = 25.0
DIVERGENT_THREADS = 24.0  # active threads per warp instruction (of 32)
TENSOR_IDLE_PCT = 5.0
POOR_LOCALITY_TRAFFIC = 2.0  # DRAM bytes over the operation's compulsory bytes
MATRIX_OPS = ("mm", "bmm", "addmm", "baddbmm", "convolution", "_scaled_mm", "matmul")
assert {
    "memory-bound",
    "compute-bound",
    "latency/overhead-bound",
    "not-vectorized",
    "poor-locality",
    "bad-speculation",
    "frontend-bound",
} <= set(VOCABULARY)


def _unavailable(reason: str, **extra: Any) -> dict[str, Any]:
    return {
        "status": "unavailable",
        "reason": reason,
        "backend": "gpu",
        "sources": [],
        "confidence": "none",
        "metrics": {},
        "roofline": {},
        "bottleneck": "unknown",
        "notes": [],
        **extra,
    }


# --- roofline ---------------------------------------------------------------------------------


def _is_matrix_op(op_cost: dict[str, Any]) -> bool:
    return any(op in MATRIX_OPS for op in (op_cost.get("flops_by_op") or {}))


def roofline(op_cost: dict[str, Any] | None, per_call_ms: float, spec: dict[str, Any], dtype: str) -> dict[str, Any]:
    """The roofline dict (same keys as profilers/roofline.py, so the shared bottleneck and diff
    code read it) or ``{"status": "unavailable", "reason": ...}``."""
    if not op_cost:
        return {"status": "unavailable", "reason": "FLOPs/bytes of the operation were not measured"}
    if spec.get("status") != "ok" or not spec.get("peak_gbs"):
        return {"status": "unavailable", "reason": f"GPU peaks unknown ({spec.get('reason', 'no bandwidth')})"}
    key = gpu_spec.dtype_key(dtype)
    # Half types reach the tensor-core roof in matrix products; fp32 products must stay IEEE
    # (anticheat: no TF32), so their roof is the fp32 pipes.
    tensor = _is_matrix_op(op_cost) and key in gpu_spec.TENSOR_DTYPES
    peak_gflops = gpu_spec.compute_peak_gflops(spec, key, uses_tensor_cores=tensor)
    if per_call_ms <= 0 or op_cost["min_bytes"] <= 0 or peak_gflops <= 0:
        return {"status": "unavailable", "reason": "no time, no bytes or no compute peak to relate"}
    seconds = per_call_ms / 1e3
    flops, min_bytes, peak_gbs = op_cost["flops"], op_cost["min_bytes"], spec["peak_gbs"]
    intensity, ridge = flops / min_bytes, peak_gflops / peak_gbs
    achieved_gflops, achieved_gbs = flops / seconds / 1e9, min_bytes / seconds / 1e9
    if flops > 0:
        attainable = min(peak_gflops, intensity * peak_gbs)
        pct = 100.0 * achieved_gflops / attainable
    else:
        attainable, pct = 0.0, 100.0 * achieved_gbs / peak_gbs
    out = {
        "status": "ok",
        "flops": flops,
        "min_bytes": min_bytes,
        "flops_method": op_cost.get("flops_method", ""),
        "flops_by_op": op_cost.get("flops_by_op", {}),
        "arithmetic_intensity": intensity,
        "achieved_gflops": achieved_gflops,
        "achieved_gbs": achieved_gbs,
        "peak_gflops": peak_gflops,
        "peak_gbs": peak_gbs,
        "ridge_flop_per_byte": ridge,
        "attainable_gflops": attainable,
        "roofline_pct": pct,
        "bound_by": "memory" if intensity < ridge else "compute",
        "compute_roof": f"{key} {'tensor cores' if tensor else 'CUDA cores'}",
        "num_threads": 0,
    }
    # Above 100% of a nominal peak is a measurement problem, as on CPU (roofline.above_roof).
    problem = cpu_roofline.above_roof(out)
    return {**out, "above_roof": problem} if problem else out


def roofline_metrics(roof: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if roof.get("status") != "ok":
        return {}
    return {
        n: metric(n, roof[n], ROOFLINE_SOURCE)
        for n in ("achieved_gflops", "achieved_gbs", "arithmetic_intensity", "roofline_pct")
    }


def render_roofline(roof: dict[str, Any]) -> str:
    if roof.get("status") != "ok":
        return f"roofline unavailable: {roof.get('reason', '')}"
    side = "memory side" if roof["bound_by"] == "memory" else "compute side"
    return (
        f"roofline: {roof['flops'] / 1e6:.4g} MFLOP ({roof['flops_method']}) and {roof['min_bytes'] / 1e6:.4g} MB "
        f"compulsory traffic per call, intensity {roof['arithmetic_intensity']:.3g} FLOP/byte vs ridge "
        f"{roof['ridge_flop_per_byte']:.3g} ({roof['compute_roof']}): {side}. Achieved {roof['achieved_gflops']:.4g} "
        f"GFLOP/s and {roof['achieved_gbs']:.4g} GB/s = {cpu_roofline.share_text(roof, roof['roofline_pct'])} of "
        f"attainable (nominal peaks {roof['peak_gflops'] / 1e3:.4g} TFLOP/s, {roof['peak_gbs']:.0f} GB/s)"
    ) + (f". {roof['above_roof']}" if roof.get("above_roof") else "")


# --- bottleneck -------------------------------------------------------------------------------


def _v(metrics: dict[str, dict[str, Any]], name: str) -> float | None:
    return metrics.get(name, {}).get("value")


def signals_gpu(
    metrics: dict[str, dict[str, Any]], roof: dict[str, Any] | None, per_call_ms: float
) -> list[tuple[str, str]]:
    """Every label the evidence supports, strongest first, in the shared vocabulary."""
    out: list[tuple[str, str]] = []
    kernel_us = _v(metrics, "gpu__time_duration.sum")
    if kernel_us is None and (torch_ms := _v(metrics, "torch_profiler_kernel_ms")) is not None:
        kernel_us = torch_ms * 1e3
    if kernel_us is not None and per_call_ms > 0 and kernel_us / 1e3 < KERNEL_SHARE_LOW * per_call_ms:
        out.append(
            (
                "latency/overhead-bound",
                f"kernels run {kernel_us:.3g} us of a {per_call_ms * 1e3:.3g} us call: "
                "launch and Python overhead dominate (fuse kernels, fewer launches)",
            )
        )
    sm = _v(metrics, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    mem = _v(metrics, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    dram = _v(metrics, "dram__throughput.avg.pct_of_peak_sustained_elapsed")
    if sm is not None and mem is not None:
        if mem >= SOL_HIGH_PCT and mem >= sm:
            out.append(
                ("memory-bound", f"memory speed of light {mem:.0f}% (DRAM {dram or 0:.0f}%) vs compute {sm:.0f}%")
            )
        elif sm >= SOL_HIGH_PCT:
            out.append(("compute-bound", f"compute speed of light {sm:.0f}% vs memory {mem:.0f}%"))
    dram_bytes = _v(metrics, "dram__bytes.sum")
    if dram_bytes and roof and roof.get("status") == "ok" and dram_bytes > POOR_LOCALITY_TRAFFIC * roof["min_bytes"]:
        hit = _v(metrics, "lts__t_sector_hit_rate.pct")
        out.append(
            (
                "poor-locality",
                f"DRAM moves {dram_bytes / roof['min_bytes']:.1f}x the operation's compulsory "
                f"bytes" + (f" (L2 hit rate {hit:.0f}%)" if hit is not None else ""),
            )
        )
    threads = _v(metrics, "smsp__thread_inst_executed_per_inst_executed.ratio")
    if threads is not None and threads < DIVERGENT_THREADS:
        out.append(("bad-speculation", f"warp divergence: {threads:.1f} of 32 threads active per instruction"))
    tensor = max(
        (
            v
            for n in (
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            )
            if (v := _v(metrics, n)) is not None
        ),
        default=None,
    )
    if (
        tensor is not None
        and tensor < TENSOR_IDLE_PCT
        and roof
        and roof.get("status") == "ok"
        and _is_matrix_op(roof)
        and (sm or 0) >= SOL_LOW_PCT
    ):
        out.append(
            (
                "not-vectorized",
                f"a matrix product on CUDA cores: tensor pipe {tensor:.0f}% busy (tl.dot on "
                "fp16/bf16 tiles, or input_precision='tf32x3' for fp32, uses tensor cores)",
            )
        )
    if sm is not None and mem is not None and sm < SOL_LOW_PCT and mem < SOL_LOW_PCT:
        occ = _v(metrics, "sm__warps_active.avg.pct_of_peak_sustained_active")
        limiter = ncu.occupancy_limiter(metrics)
        top = ncu.stalls(metrics, 1)
        why = [f"compute {sm:.0f}% and memory {mem:.0f}% of speed of light"]
        if occ is not None:
            why.append(
                f"achieved occupancy {occ:.0f}%"
                + (f" (limited by {limiter[0]})" if limiter and occ < LOW_OCCUPANCY_PCT else "")
            )
        if top:
            why.append(f"warps mostly stalled on {top[0][0]} ({top[0][1]:.2g} cycles/issue)")
        waves = _v(metrics, "launch__waves_per_multiprocessor")
        if waves is not None and waves < 1:
            why.append(f"the grid fills {100 * waves:.0f}% of one wave")
        out.append(("latency/overhead-bound", "; ".join(why) + ": latency, not throughput, limits the kernel"))
    if (side := roofline_side(roof)) and not any(label == side[0] for label, _ in out):
        out.append(side)
    return out


# --- assemble ---------------------------------------------------------------------------------


def assemble(
    region: dict[str, Any],
    spec: dict[str, Any],
    *,
    parsed: dict[str, Any] | None,
    notes: list[str],
    tools: dict[str, Any],
    unavailable: dict[str, str],
    extra_summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A profile dict from the region's result (timing, op cost, torch kernels) and, when ncu ran,
    its parsed CSV. Pure: tested on checked-in CSV and region JSON."""
    calls = int(region.get("calls") or 1)
    per_call_ms = float(region.get("per_call_ms") or 0.0)
    metrics: dict[str, dict[str, Any]] = {"per_call_ms": metric("per_call_ms", per_call_ms, TIMING_SOURCE)}
    sources = [TIMING_SOURCE]
    table: list[dict[str, Any]] = []
    if parsed is not None:
        nm, nu = ncu.to_metrics(parsed, calls)
        metrics.update(nm)
        unavailable.update(nu)
        table = ncu.kernels(parsed, calls)
        if nm:
            sources.append(ncu.SOURCE)
    elif region.get("kernels") is not None:
        table = [
            {"name": k["name"], "launches_per_call": k["launches_per_call"], "us_per_call": k["us_per_call"]}
            for k in region["kernels"]
        ]
        total_ms = sum(k["us_per_call"] for k in table) / 1e3
        metrics["torch_profiler_kernel_ms"] = metric("torch_profiler_kernel_ms", total_ms, TORCH_SOURCE)
        sources.append(TORCH_SOURCE)
    if region.get("op_cost_error"):
        notes.append(f"operation FLOPs/bytes not measured: {region['op_cost_error']}")
    roof = roofline(region.get("op_cost"), per_call_ms, spec, region.get("dtype", "float32"))
    metrics.update(roofline_metrics(roof))
    if roof.get("status") == "ok":
        sources.append(ROOFLINE_SOURCE)
    else:
        unavailable["roofline"] = roof["reason"]
    signals = signals_gpu(metrics, roof, per_call_ms)
    label, why = signals[0] if signals else ("unknown", "no counter or roofline evidence separates the bottlenecks")
    confidence = "hardware-counters" if ncu.SOURCE in sources else "timing-only"
    return {
        "status": "ok",
        "backend": "gpu",
        "device": region.get("device", spec.get("name", "")),
        "sources": sources,
        "confidence": confidence,
        "metrics": metrics,
        "roofline": roof,
        "bottleneck": label,
        "bottleneck_evidence": why,
        "signals": [{"label": lab, "evidence": ev} for lab, ev in signals],
        "kernels": table[:12],
        "unavailable": unavailable,
        "notes": notes,
        "tools": tools,
        "extra_metrics": extra_summary or {},
        "calls": calls,
    }


# --- collect ----------------------------------------------------------------------------------


def _why(outcome: sandbox.SandboxOutcome) -> str:
    if outcome.timed_out_phase:
        return f"timed out in phase '{outcome.timed_out_phase}'"
    if outcome.result and outcome.result.get("status") != "ok":
        return str(outcome.result.get("message", ""))[:300]
    lines = [ln for ln in outcome.output_tail.strip().splitlines() if ln.strip()]
    return (lines or [f"exit code {outcome.exit_code}"])[-1][:300]


def _run(
    problem_path: str, code: str, ctx: Context, updates: dict[str, Any], prefix: list[str], run_timeout_s: float
) -> sandbox.SandboxOutcome:
    req = {**request_for(problem_path, ctx, "profile"), "op_cost": True, **updates}
    return sandbox.run_worker(
        req,
        compile_timeout_s=ctx.compile_timeout_s,
        run_timeout_s=run_timeout_s,
        memory_limit_bytes=memory_limit_bytes(ctx),
        num_threads=ctx.num_threads,
        extra_env={**build_env(), **sandbox_env(ctx)},
        files={"candidate.py": code},
        command_prefix=prefix,
    )


def _ncu_run(
    problem_path: str, code: str, ctx: Context, binary: str, metrics: list[str], tools: dict[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    """(region result, parsed CSV, diagnosis of a failure); one retry without unknown metrics."""
    run_dir = Path(tempfile.mkdtemp(prefix="pragma-ncu-"))
    try:
        for attempt in range(2):
            report, log_file = run_dir / f"report{attempt}", run_dir / f"ncu{attempt}.log"
            t0 = time.monotonic()
            with ncu.exclusive(ctx.ncu_timeout_s) as waited_s:
                outcome = _run(
                    problem_path,
                    code,
                    ctx,
                    {"gpu_profiler": "ncu", "profile_calls": ctx.ncu_calls},
                    ncu.command_prefix(binary, metrics, report, log_file),
                    ctx.ncu_timeout_s,
                )
            tools["ncu"] = {
                "wall_s": round(time.monotonic() - t0, 2),
                "lock_wait_s": round(waited_s, 2),
                "metrics": len(metrics),
                "phases_s": outcome.phases_s,
            }
            log_text = (log_file.read_text(errors="replace") if log_file.exists() else "") + outcome.output_tail
            diagnosis = ncu.diagnose_log(log_text)
            if diagnosis and diagnosis["kind"] == "unknown_metric" and attempt == 0:
                metrics = [m for m in metrics if m not in diagnosis["metrics"]]
                tools["ncu"]["dropped"] = diagnosis["metrics"]
                continue
            if outcome.result is None or outcome.result.get("status") != "ok":
                return None, None, diagnosis or {"kind": "run_failed", "reason": f"ncu run failed: {_why(outcome)}"}
            text, why = ncu.export_csv(binary, report)
            if text is None:
                return outcome.result, None, diagnosis or {"kind": "no_report", "reason": why}
            parsed = ncu.parse(text)
            if not parsed["launches"]:
                return outcome.result, None, diagnosis or {"kind": "no_kernels", "reason": "ncu profiled no kernels"}
            return outcome.result, parsed, None
        return None, None, {"kind": "unknown_metric", "reason": "ncu rejected the metric set twice"}
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def profile_candidate(
    problem_path: str, code: str, ctx: Context, extra_metrics: list[str] | None = None
) -> dict[str, Any]:
    started = time.monotonic()
    try:
        device = device_for(ctx)
    except BackendUnavailable as exc:
        return _unavailable(str(exc))
    if device != "cuda":
        return _unavailable(
            "no CUDA device: under TRITON_INTERPRET=1 the verifier checks correctness only, and "
            "there is no GPU to profile"
        )
    spec = gpu_spec.device_spec()
    req = ncu.resolve_extra(extra_metrics or [])
    notes = [f"ignored extra metric {k!r}: {v}" for k, v in req.rejected.items()]
    tools: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    region = parsed = None
    binary = ncu.ncu_binary()
    if binary is None:
        fallback_why = "ncu (Nsight Compute) not found on PATH or in /usr/local/cuda/bin"
    else:
        wanted = list(ncu.DEFAULT_METRICS) + req.metrics
        metrics, missing = ncu.select_metrics(wanted, ncu.available_metrics(binary))
        for name in missing:
            unavailable[name] = "not offered by this ncu/GPU (ncu --query-metrics)"
        try:
            region, parsed, diagnosis = _ncu_run(problem_path, code, ctx, binary, metrics, tools)
        except TimeoutError as exc:
            region, parsed, diagnosis = None, None, {"kind": "lock", "reason": str(exc)}
        fallback_why = diagnosis["reason"] if diagnosis else ""
        if diagnosis:
            tools.setdefault("ncu", {}).update(status="unavailable", reason=diagnosis["reason"])
        else:
            tools["ncu"]["status"] = "ok"
    if parsed is None:
        unavailable["ncu"] = fallback_why
        notes.append(f"Nsight Compute unavailable ({fallback_why}); kernel timings from torch.profiler instead")
        t0 = time.monotonic()
        outcome = _run(problem_path, code, ctx, {"gpu_profiler": "torch"}, [], ctx.run_timeout_s)
        tools["torch_profiler"] = {"wall_s": round(time.monotonic() - t0, 2)}
        if outcome.result is None or outcome.result.get("status") != "ok":
            return _unavailable(f"profiled run failed: {_why(outcome)}", notes=notes, tools=tools)
        region = outcome.result
    profile = assemble(
        region, spec, parsed=parsed, notes=notes, tools=tools, unavailable=unavailable, extra_summary=req.summary()
    )
    profile["profile_wall_s"] = round(time.monotonic() - started, 2)
    return profile


# --- render -----------------------------------------------------------------------------------


def render_profile(profile: dict[str, Any]) -> str:
    """The profile as prompt text: sources and confidence first, then label, roofline, ncu."""
    if profile.get("status") != "ok":
        return f"profile unavailable: {profile.get('reason', '')}"
    metrics = profile["metrics"]
    lines = [
        f"device: {profile.get('device', '')}; sources: {', '.join(profile['sources'])}; "
        f"confidence: {profile['confidence']}",
        f"bottleneck: {profile['bottleneck']} ({profile.get('bottleneck_evidence', '')})",
    ]
    if others := profile.get("signals", [])[1:]:
        lines.append("other signals: " + "; ".join(f"{s['label']} ({s['evidence']})" for s in others))
    lines.append(
        f"time per call: {metrics['per_call_ms']['value'] * 1e3:.4g} us (CUDA events)"
        + (
            f", kernels {metrics['gpu__time_duration.sum']['value']:.4g} us (ncu, base clocks)"
            if "gpu__time_duration.sum" in metrics
            else ""
        )
        + (
            f", kernels {metrics['torch_profiler_kernel_ms']['value'] * 1e3:.4g} us (torch.profiler)"
            if "torch_profiler_kernel_ms" in metrics
            else ""
        )
    )
    if profile.get("roofline", {}).get("status") == "ok":
        lines.append(render_roofline(profile["roofline"]))
    if ncu.SOURCE in profile["sources"]:
        lines.append(ncu.render_summary(metrics))
    if profile.get("kernels"):
        lines.append(
            ncu.render_kernels(profile["kernels"])
            if "grid" in profile["kernels"][0]
            else "kernels per call: "
            + "; ".join(
                f"{k['name'][:60]} x{k['launches_per_call']:.3g} {k['us_per_call']:.4g} us"
                for k in profile["kernels"][:6]
            )
        )
    named = [f"{n} {m['value']:.4g} {m['unit']}" for n, m in metrics.items() if m["source"] == ncu.SOURCE]
    if named:
        lines.append("ncu metrics: " + ", ".join(named))
    if profile.get("unavailable"):
        by_reason: dict[str, list[str]] = {}
        for name, reason in profile["unavailable"].items():
            by_reason.setdefault(reason, []).append(name)
        lines.append("unavailable: " + "; ".join(f"{', '.join(n)} ({r})" for r, n in by_reason.items()))
    lines += [f"note: {n}" for n in profile.get("notes", [])]
    return "\n".join(lines)
