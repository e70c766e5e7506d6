"""One bottleneck vocabulary shared by every profiler (CPU now, GPU later).

``classify_cpu`` looks at the evidence a CPU profile has, strongest first, and returns the primary
label, its evidence in words, and every signal that fired (so the Conductor sees secondary
problems too). ``roofline_side`` is backend-neutral: the GPU profiler can call it with its own
roofline dict.
"""

from __future__ import annotations

from typing import Any, Literal

from pragma.tools.profilers.instruction_mix import packed_dominates

Bottleneck = Literal[
    "memory-bound",
    "compute-bound",
    "latency/overhead-bound",
    "not-vectorized",
    "poor-locality",
    "bad-speculation",
    "frontend-bound",
    "cache-resident",
    "dram-bound",
    "unknown",
]
VOCABULARY: tuple[str, ...] = Bottleneck.__args__  # type: ignore[attr-defined]

OVERHEAD_PER_CALL_MS = 0.05  # below this, Python/ctypes call overhead dominates a CPU kernel
KERNEL_SHARE_NOT_OVERHEAD_PCT = 50.0  # ...unless perf puts at least this share of samples in the kernel
BAD_SPECULATION_PCT = 20.0  # top-down slots lost to bad speculation
FRONTEND_BOUND_PCT = 30.0  # top-down slots starved by the frontend
BRANCH_MISS_PCT = 5.0  # mispredicted share of branches (hardware counters)
# callgrind's predictor (2-bit counters, no loop detection) misses every short fixed-trip loop's
# exit that real CPUs predict, so only a much higher simulated rate means data-dependent branches.
SIM_BRANCH_MISS_PCT = 15.0
BRANCHY_SHARE = 0.02  # branches per instruction below which mispredictions cannot matter
POOR_LOCALITY_TRAFFIC = 4.0  # L1 fills over the operation's compulsory bytes, memory side
POOR_LOCALITY_TRAFFIC_COMPUTE = 16.0  # ... on the compute side, where reuse is expected
LOW_ROOF_PCT = 10.0  # a compute-side kernel this far below its roof is not compute-bound
SCALAR_MEMORY_PCT = 50.0  # a scalar memory-side kernel below this share of bandwidth is held back by scalar code
CACHE_RESIDENT_PCT = 120.0  # above the bandwidth roof: the data comes from a faster level than assumed
SCALAR_FLOOR_PCT = 5.0  # a scalar memory-side kernel below this share of its roof is more than scalar
FAR_FROM_ROOF_PCT = 50.0  # a memory-side kernel below this share of its level's roof is not bandwidth-limited

Signal = tuple[str, str]  # (label, evidence)


def _v(metrics: dict[str, dict[str, Any]], name: str) -> float | None:
    return metrics.get(name, {}).get("value")


def roofline_side(roof: dict[str, Any] | None) -> Signal | None:
    """memory-bound / compute-bound from the side of the ridge point the kernel sits on."""
    if not roof or roof.get("status") != "ok":
        return None
    where = (
        f"intensity {roof['arithmetic_intensity']:.3g} FLOP/byte vs ridge {roof['ridge_flop_per_byte']:.3g}, "
        f"{roof['roofline_pct']:.0f}% of attainable"
    )
    if roof["bound_by"] == "memory":
        if "roof_level" not in roof:  # a roofline without cache levels (GPU, older peaks)
            return "memory-bound", f"{where} ({roof['achieved_gbs']:.3g} of {roof['peak_gbs']:.3g} GB/s)" + _above(roof)
        # The memory side splits by where the working set lives: its roof is that level's bandwidth.
        label = "dram-bound" if roof["roof_level"] == "DRAM" else "cache-resident"
        text = (
            f"{roof['roof_why']}: {roof['achieved_gbs']:.3g} of {roof['peak_gbs']:.3g} GB/s = "
            f"{roof['bandwidth_pct']:.0f}% of the {roof['roof_level']} roof"
        )
        if roof["bandwidth_pct"] < FAR_FROM_ROOF_PCT:
            text += "; far from that roof: bandwidth is not what limits it (instructions per byte, vector width, loop overhead)"
        return label, f"{text}; {where}" + _above(roof)
    achieved = f"{roof['achieved_gflops']:.3g} of {roof['peak_gflops']:.3g} GFLOP/s"
    return "compute-bound", f"{where} ({achieved})" + _above(roof)


def _above(roof: dict[str, Any]) -> str:
    """A share above 100% of a roof is named as the measurement problem it is (roofline.above_roof)."""
    return f"; {roof['above_roof']}" if roof.get("above_roof") else ""


def _is_scalar(vect: dict[str, Any] | None, mix: dict[str, Any] | None) -> str | None:
    if mix and mix.get("scalar_fp", 0) > 0 and mix.get("packed_fp", 0) == 0:
        return "the built kernel contains scalar FP instructions only"
    hot = (mix or {}).get("hot_loop") or {}
    if hot.get("scalar_fp", 0) > 0 and hot.get("packed_fp", 0) == 0:
        return "the kernel's hot loop runs scalar FP instructions only (objdump)"
    # gcc's report covers only its own auto-vectorization: a loop written with intrinsics is
    # "not vectorized" there although the binary runs packed vector code (objdump says which).
    if vect and vect.get("loops") and vect.get("vectorized_loops") == 0 and not packed_dominates(mix):
        return "the compiler vectorized none of the kernel's loops"
    return None


def _overhead_bound(metrics: dict[str, dict[str, Any]]) -> bool:
    """A short call whose time is not mostly the kernel's own. Why the second half: the ablation's
    max pooling, at 45 us per call with 75% of perf's samples inside the kernel, was labelled
    "call overhead dominates", and the Conductor chased Python overhead."""
    per_call = _v(metrics, "per_call_ms")
    if per_call is None or per_call >= OVERHEAD_PER_CALL_MS:
        return False
    share = _v(metrics, "kernel_samples_pct")  # present only with enough samples (hotspots.py)
    return share is None or share < KERNEL_SHARE_NOT_OVERHEAD_PCT


def signals_cpu(
    metrics: dict[str, dict[str, Any]],
    roof: dict[str, Any] | None,
    vect: dict[str, Any] | None,
    mix: dict[str, Any] | None,
) -> list[Signal]:
    """Every label the evidence supports, strongest evidence first."""
    out: list[Signal] = []
    per_call = _v(metrics, "per_call_ms")
    if _overhead_bound(metrics):
        out.append(("latency/overhead-bound", f"{per_call * 1e3:.1f} us per call: call overhead dominates"))
    if (bad := _v(metrics, "topdown_bad_speculation_pct")) is not None and bad > BAD_SPECULATION_PCT:
        out.append(("bad-speculation", f"top-down: {bad:.0f}% of slots lost to bad speculation"))
    if (fe := _v(metrics, "topdown_frontend_bound_pct")) is not None and fe > FRONTEND_BOUND_PCT:
        out.append(("frontend-bound", f"top-down: {fe:.0f}% of slots frontend bound"))
    for pct_name, branches, instructions, limit, what in (
        ("branch_miss_pct", "branches", "instructions", BRANCH_MISS_PCT, "perf counters"),
        ("sim_branch_mispredict_pct", "sim_branches", "sim_instructions", SIM_BRANCH_MISS_PCT, "simulation"),
    ):
        pct, nb, ni = _v(metrics, pct_name), _v(metrics, branches), _v(metrics, instructions)
        if pct is not None and pct > limit and (not ni or (nb or 0) / ni > BRANCHY_SHARE):
            out.append(("bad-speculation", f"{pct:.1f}% of branches mispredicted ({what})"))
    side = roofline_side(roof)
    traffic = _v(metrics, "sim_d1_traffic_ratio")
    if traffic is not None and side:
        low_compute = side[0] == "compute-bound" and roof["roofline_pct"] < LOW_ROOF_PCT
        if (side[0] != "compute-bound" and traffic > POOR_LOCALITY_TRAFFIC) or (
            low_compute and traffic > POOR_LOCALITY_TRAFFIC_COMPUTE
        ):
            out.append(("poor-locality", f"L1 fills move {traffic:.1f}x the operation's minimum bytes (simulation)"))
    if (mem := _v(metrics, "topdown_memory_bound_pct")) is not None and side is None:
        core = _v(metrics, "topdown_core_bound_pct") or 0.0
        out.append(
            (
                "memory-bound" if mem >= core else "compute-bound",
                f"top-down level 2: memory bound {mem:.0f}% vs core bound {core:.0f}% of slots",
            )
        )
    if scalar := _is_scalar(vect, mix):
        # Scalar code limits a memory-side kernel when it is far below the roof of the level its
        # data lives in, or above it (the data then comes from a faster level than assumed).
        pct = roof["roofline_pct"] if side else 0.0
        held_back = side is None or side[0] == "compute-bound" or pct < SCALAR_MEMORY_PCT or pct > CACHE_RESIDENT_PCT
        if held_back:
            out.append(("not-vectorized", scalar))
    if side:
        if side[0] == "compute-bound" and roof["roofline_pct"] < LOW_ROOF_PCT:
            out.append(("compute-bound", f"{side[1]}; far below the compute roof"))
        else:
            out.append(side)
    return out


def ambiguity(
    metrics: dict[str, dict[str, Any]],
    roof: dict[str, Any] | None,
    vect: dict[str, Any] | None,
    mix: dict[str, Any] | None,
) -> str:
    """Why the cheap evidence (time, roofline, static analysis) cannot name the bottleneck, or ""
    when it can. Then the cache simulation is worth its cost: a vectorized kernel far below its
    roof may be held back by its access pattern (strided, reused lines evicted), which only cache
    figures show. Call overhead and scalar code explain a low roof share by themselves."""
    if _overhead_bound(metrics):
        return ""
    if not roof or roof.get("status") != "ok":
        return "no roofline"
    share = roof.get("bandwidth_pct", roof["roofline_pct"])
    if _is_scalar(vect, mix):
        # A scalar loop still streams about 4 bytes a cycle (>10 GB/s here), a tenth of a cache roof
        # or more; far below that, scalar code is not the whole story (the access pattern may be).
        if roof["bound_by"] == "memory" and share < SCALAR_FLOOR_PCT:
            return f"scalar, yet only {share:.1f}% of its {roof.get('roof_level', 'bandwidth')} roof: access pattern unknown"
        return ""
    if roof["bound_by"] == "memory" and roof.get("bandwidth_pct", roof["roofline_pct"]) < FAR_FROM_ROOF_PCT:
        return (
            f"vectorized, memory side, {roof.get('bandwidth_pct', roof['roofline_pct']):.0f}% of its "
            f"{roof.get('roof_level', 'bandwidth')} roof: access pattern unknown"
        )
    if roof["bound_by"] == "compute" and roof["roofline_pct"] < LOW_ROOF_PCT:
        return f"vectorized, compute side, {roof['roofline_pct']:.0f}% of the compute roof: locality unknown"
    return ""


def classify_cpu(
    metrics: dict[str, dict[str, Any]],
    vect: dict[str, Any] | None,
    mix: dict[str, Any] | None,
    roof: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """Best label the available evidence supports, and the evidence in words."""
    signals = signals_cpu(metrics, roof, vect, mix)
    if not signals:
        return "unknown", "no roofline, counter or static evidence separates the bottlenecks"
    return signals[0]
