"""Roofline of one kernel call: the operation's FLOPs and minimum bytes (measured on the reference
in the profiled run, tools/region.py) against this machine's measured peaks (tools/hardware.py).

attainable GFLOP/s = min(peak GFLOP/s, intensity x peak GB/s); the kernel sits on the memory side
of the roofline when its intensity is below the ridge point (peak GFLOP/s / peak GB/s). The
minimum bytes are compulsory traffic (every input and parameter read once, every output written
once), so achieved GB/s is a lower bound on the real traffic rate.

The bandwidth roof is the one of the level the working set lives in: the profiled region calls the
kernel again and again on the same inputs and outputs, so a working set (minimum bytes, every
tensor the call touches) that fits a cache level is served from it, and its roof is that level's
measured triad bandwidth, not DRAM's. Comparing a cache-resident kernel with the DRAM roof reads it
as "at the roof" when it is far from it (issue 13: max-pool at 97% of DRAM, 40% of L3).
"""

from __future__ import annotations

from typing import Any

from pragma.tools.hardware import peaks_for_threads, roof_for_working_set
from pragma.tools.profilers.metrics import metric

SOURCE = "roofline (reference FLOPs/bytes, measured peaks)"


def compute(
    op_cost: dict[str, Any] | None, per_call_ms: float, peak: dict[str, Any] | None, num_threads: int
) -> dict[str, Any]:
    """The roofline dict for a profile, or ``{"status": "unavailable", "reason": ...}``."""
    if not op_cost:
        return {"status": "unavailable", "reason": "FLOPs/bytes of the operation were not measured"}
    if not peak or peak.get("status") != "ok":
        return {"status": "unavailable", "reason": (peak or {}).get("reason", "machine peaks not measured")}
    if per_call_ms <= 0 or op_cost["min_bytes"] <= 0:
        return {"status": "unavailable", "reason": "no time or no bytes to relate"}
    peak_gflops, _ = peaks_for_threads(peak, num_threads)
    level = roof_for_working_set(peak, op_cost["min_bytes"], num_threads)
    peak_gbs = level["roof_gbs"]
    seconds = per_call_ms / 1e3
    flops, min_bytes = op_cost["flops"], op_cost["min_bytes"]
    intensity = flops / min_bytes
    ridge = peak_gflops / peak_gbs
    achieved_gflops, achieved_gbs = flops / seconds / 1e9, min_bytes / seconds / 1e9
    if flops > 0:
        attainable = min(peak_gflops, intensity * peak_gbs)
        pct = 100.0 * achieved_gflops / attainable
    else:  # pure data movement: the bandwidth roof is the only roof
        attainable, pct = 0.0, 100.0 * achieved_gbs / peak_gbs
    return {
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
        "num_threads": num_threads,
        "working_set_bytes": min_bytes,
        "roof_gbs": peak_gbs,
        "bandwidth_pct": 100.0 * achieved_gbs / peak_gbs,
        # Only peaks with per-level figures name a level; older ones give the DRAM roof, level unknown.
        **(
            {"roof_level": level["level"], "roof_why": level["why"], "dram_gbs": level["dram_gbs"]}
            if peak.get("levels")
            else {}
        ),
    }


def to_metrics(roof: dict[str, Any]) -> dict[str, dict]:
    if roof.get("status") != "ok":
        return {}
    return {
        name: metric(name, roof[name], SOURCE)
        for name in (
            "achieved_gflops",
            "achieved_gbs",
            "arithmetic_intensity",
            "roofline_pct",
            "working_set_bytes",
            "roof_gbs",
        )
        if name in roof
    }


def render(roof: dict[str, Any]) -> str:
    if roof.get("status") != "ok":
        return f"roofline unavailable: {roof.get('reason', '')}"
    side = (
        "memory side (intensity below the ridge point)"
        if roof["bound_by"] == "memory"
        else "compute side (intensity above the ridge point)"
    )
    level = ""
    if "roof_level" in roof:
        level = (
            f"{roof['roof_why']}: roof {roof['roof_gbs']:.3g} GB/s, achieved {roof['achieved_gbs']:.3g} GB/s "
            f"= {roof['bandwidth_pct']:.0f}% of the {roof['roof_level']} roof"
            + (f" (DRAM roof {roof['dram_gbs']:.3g} GB/s does not apply)" if roof["roof_level"] != "DRAM" else "")
            + ". "
        )
    return level + (
        f"roofline: {roof['flops'] / 1e6:.4g} MFLOP ({roof['flops_method']}) and {roof['min_bytes'] / 1e6:.4g} MB "
        f"minimum traffic per call, intensity {roof['arithmetic_intensity']:.3g} FLOP/byte vs ridge "
        f"{roof['ridge_flop_per_byte']:.3g}: {side}. Achieved {roof['achieved_gflops']:.3g} GFLOP/s and "
        f"{roof['achieved_gbs']:.3g} GB/s = {roof['roofline_pct']:.0f}% of attainable "
        f"(peaks {roof['peak_gflops']:.3g} GFLOP/s, {roof['peak_gbs']:.3g} GB/s {roof.get('roof_level', '')} at {roof['num_threads']} thread(s))"
    )
