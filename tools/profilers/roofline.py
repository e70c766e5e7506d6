"""Roofline of one kernel call: the operation's FLOPs and minimum bytes (measured on the reference
in the profiled run, tools/inside/region.py) against this machine's measured peaks (tools/hardware.py).

attainable GFLOP/s = min(peak GFLOP/s, intensity x peak GB/s); the kernel sits on the memory side
of the roofline when its intensity is below the ridge point (peak GFLOP/s / peak GB/s). The
minimum bytes are compulsory traffic (every input and parameter read once, every output written
once), so achieved GB/s is a lower bound on the real traffic rate.

The bandwidth roof is the one of the level the working set lives in: the profiled region calls the
kernel again and again on the same inputs and outputs, so a working set (minimum bytes, every
tensor the call touches) that fits a cache level is served from it, and its roof is that level's
measured triad bandwidth, not DRAM's. Comparing a cache-resident kernel with the DRAM roof reads it
as "at the roof" when it is far from it (issue 13: max-pool at 97% of DRAM, 40% of L3). A kernel that
writes its outputs with streaming (non-temporal) stores keeps them out of the caches, so only its
inputs compete for them: its level is the one its inputs fit (the demo's streaming ReLU, 32.8 MB in
and 32.8 MB out, reads its input from the 32 MiB L3 call after call and read 169% of the DRAM roof).

A figure above 100% of a roof is not a kernel beyond the hardware but a measurement problem (a roof
measured too low, under load or with another access pattern; data served from a faster level than
the one assumed): ``above_roof`` names it, and every rendering says so instead of printing the
percentage as an achievement.
"""

from __future__ import annotations

import re
from typing import Any

from pragma.tools.hardware import peaks_for_threads, roof_for_working_set
from pragma.tools.profilers.metrics import metric

SOURCE = "roofline (reference FLOPs/bytes, measured peaks)"
ROOF_PCT = 100.0  # above this share of a roof a figure is a measurement problem, never an achievement
_NONTEMPORAL_STORE = re.compile(r"^\s+[0-9a-f]+:\s+v?movnt(?:ps|pd|dq|i)\b", re.MULTILINE)


def streaming_stores(objdump_text: str) -> int:
    """Non-temporal (streaming) store instructions in a kernel's disassembly (objdump -d)."""
    return len(_NONTEMPORAL_STORE.findall(objdump_text or ""))


def above_roof(roof: dict[str, Any]) -> str:
    """'' when the kernel is within its roofs, else the measurement problem in words."""
    if roof.get("status") != "ok":
        return ""
    memory = roof.get("bound_by") == "memory"
    pct = float(roof.get("bandwidth_pct", roof["roofline_pct"]) if memory else roof["roofline_pct"])
    if pct <= ROOF_PCT:
        return ""
    if memory:
        where = f"the {roof.get('roof_level', 'bandwidth')} roof ({roof['peak_gbs']:.3g} GB/s)"
        why = (
            "the roof was measured too low (under load, or with a slower access pattern than this kernel's) "
            "or part of the data came from a faster level than the working set suggests"
        )
    else:
        where = f"the compute roof ({roof['peak_gflops']:.3g} GFLOP/s)"
        why = "the peak was measured too low (under load) or the FLOP count overstates the work"
    return (
        f"measurement problem: {pct:.0f}% of {where} is impossible for any kernel, so this figure does not "
        f"bound it ({why}); do not read it as a kernel at or beyond its roof"
    )


def compute(
    op_cost: dict[str, Any] | None,
    per_call_ms: float,
    peak: dict[str, Any] | None,
    num_threads: int,
    streaming_store_count: int = 0,
) -> dict[str, Any]:
    """The roofline dict for a profile, or ``{"status": "unavailable", "reason": ...}``.
    ``streaming_store_count``: non-temporal stores in the kernel's code (``streaming_stores``)."""
    if not op_cost:
        return {"status": "unavailable", "reason": "FLOPs/bytes of the operation were not measured"}
    if not peak or peak.get("status") != "ok":
        return {"status": "unavailable", "reason": (peak or {}).get("reason", "machine peaks not measured")}
    if per_call_ms <= 0 or op_cost["min_bytes"] <= 0:
        return {"status": "unavailable", "reason": "no time or no bytes to relate"}
    peak_gflops, _ = peaks_for_threads(peak, num_threads)
    resident = op_cost["min_bytes"]
    if streaming_store_count and op_cost.get("read_bytes"):
        resident = op_cost["read_bytes"]  # its outputs stream past the caches: the inputs may stay
    level = roof_for_working_set(peak, resident, num_threads)
    if resident != op_cost["min_bytes"]:
        level["why"] = "outputs written with streaming stores bypass the caches; inputs: " + level["why"]
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
        "num_threads": num_threads,
        "working_set_bytes": min_bytes,
        "roof_gbs": peak_gbs,
        "bandwidth_pct": 100.0 * achieved_gbs / peak_gbs,
        "streaming_stores": streaming_store_count,
        # Only peaks with per-level figures name a level; older ones give the DRAM roof, level unknown.
        **(
            {"roof_level": level["level"], "roof_why": level["why"], "dram_gbs": level["dram_gbs"]}
            if peak.get("levels")
            else {}
        ),
    }
    problem = above_roof(out)
    return {**out, "above_roof": problem} if problem else out


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


def share_text(roof: dict[str, Any], pct: float) -> str:
    """``pct`` as printed: plain within the roof, flagged as a measurement problem above it."""
    return f"{pct:.0f}%" + (" (above the roof: a measurement problem)" if pct > ROOF_PCT else "")


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
            f"= {share_text(roof, roof['bandwidth_pct'])} of the {roof['roof_level']} roof"
            + (f" (DRAM roof {roof['dram_gbs']:.3g} GB/s does not apply)" if roof["roof_level"] != "DRAM" else "")
            + ". "
        )
    text = level + (
        f"roofline: {roof['flops'] / 1e6:.4g} MFLOP ({roof['flops_method']}) and {roof['min_bytes'] / 1e6:.4g} MB "
        f"minimum traffic per call, intensity {roof['arithmetic_intensity']:.3g} FLOP/byte vs ridge "
        f"{roof['ridge_flop_per_byte']:.3g}: {side}. Achieved {roof['achieved_gflops']:.3g} GFLOP/s and "
        f"{roof['achieved_gbs']:.3g} GB/s = {share_text(roof, roof['roofline_pct'])} of attainable "
        f"(peaks {roof['peak_gflops']:.3g} GFLOP/s, {roof['peak_gbs']:.3g} GB/s {roof.get('roof_level', '')} at {roof['num_threads']} thread(s))"
    )
    if roof.get("above_roof"):
        text += f". {roof['above_roof'][0].upper()}{roof['above_roof'][1:]}"
    return text
