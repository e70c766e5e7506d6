"""Every metric the CPU profiler collects by default, in one place.

Names are stable: the Conductor reads them in profiles and diffs, may ask for them again by name,
and the knowledge compendium describes each one. A metric in a profile is always
``{"value": float, "unit": str, "source": str}``; a metric the machine cannot provide is absent
from ``metrics`` and listed under the profile's ``unavailable`` with a reason, never reported as 0.

Counts from perf and callgrind are normalised per kernel call (unit ``count/call``), so profiles
taken with different numbers of calls compare directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class MetricSpec:
    unit: str
    tool: str  # collector: timing, perf_stat, topdown, callgrind, hotspots, vectorization, instruction_mix, roofline
    better: Literal["lower", "higher", ""]  # which direction is an improvement ("" = neither)
    meaning: str


def _m(unit: str, tool: str, better: Literal["lower", "higher", ""], meaning: str) -> MetricSpec:
    return MetricSpec(unit, tool, better, meaning)


# Raw perf events keep perf's own names (the Conductor can ask for related events by the same
# spelling); derived metrics use snake_case with the unit as suffix.
DEFAULT_CPU_METRICS: dict[str, MetricSpec] = {
    # wall clock of the profiled region
    "per_call_ms": _m("ms", "timing", "lower", "wall-clock time of one kernel call inside the profiled region"),
    # perf stat, software events (work in VMs and containers)
    "task-clock": _m("ms/call", "perf_stat", "lower", "CPU time consumed per call, summed over threads"),
    "cpu_utilization": _m("cores", "perf_stat", "", "task-clock / wall time: how many cores were busy on average"),
    "page-faults": _m("count/call", "perf_stat", "lower", "page faults per call (first touch of fresh memory)"),
    "context-switches": _m("count/call", "perf_stat", "lower", "context switches per call (preemption, blocking)"),
    "cpu-migrations": _m("count/call", "perf_stat", "lower", "moves of a thread between cores per call"),
    # perf stat, hardware events (real counters only; unavailable in most VMs)
    "cycles": _m("count/call", "perf_stat", "lower", "core clock cycles per call"),
    "instructions": _m("count/call", "perf_stat", "lower", "retired instructions per call"),
    "ipc": _m("instructions/cycle", "perf_stat", "higher", "retired instructions per cycle"),
    "branches": _m("count/call", "perf_stat", "", "retired branch instructions per call"),
    "branch-misses": _m("count/call", "perf_stat", "lower", "mispredicted branches per call"),
    "branch_miss_pct": _m("%", "perf_stat", "lower", "branch-misses / branches"),
    "cache-references": _m("count/call", "perf_stat", "", "last-level cache references per call"),
    "cache-misses": _m("count/call", "perf_stat", "lower", "last-level cache misses per call"),
    "cache_miss_pct": _m("%", "perf_stat", "lower", "cache-misses / cache-references"),
    "L1-dcache-load-misses": _m("count/call", "perf_stat", "lower", "L1 data cache load misses per call"),
    "LLC-load-misses": _m("count/call", "perf_stat", "lower", "last-level cache load misses per call"),
    # top-down (perf stat -M TopdownL1/TopdownL2, or AMD PipelineL1/L2): share of pipeline slots
    "topdown_retiring_pct": _m("%", "topdown", "higher", "slots retiring useful micro-ops"),
    "topdown_bad_speculation_pct": _m("%", "topdown", "lower", "slots wasted on mispredicted or cleared work"),
    "topdown_frontend_bound_pct": _m("%", "topdown", "lower", "slots starved by instruction fetch/decode"),
    "topdown_backend_bound_pct": _m("%", "topdown", "lower", "slots stalled on execution units or memory"),
    "topdown_memory_bound_pct": _m("%", "topdown", "lower", "level 2: backend stalls waiting on the memory hierarchy"),
    "topdown_core_bound_pct": _m("%", "topdown", "lower", "level 2: backend stalls on execution ports/dividers"),
    # callgrind simulation of the kernel alone (inside the kernel's entry call; one thread)
    "sim_instructions": _m("count/call", "callgrind", "lower", "instructions executed by the kernel per call"),
    "sim_data_accesses": _m("count/call", "callgrind", "", "data reads + writes per call (each access any width)"),
    "sim_d1_misses": _m("count/call", "callgrind", "lower", "simulated L1 data cache misses (reads + writes) per call"),
    "sim_d1_miss_pct": _m("%", "callgrind", "lower", "simulated L1 data misses / data accesses"),
    "sim_ll_misses": _m("count/call", "callgrind", "lower", "simulated last-level cache misses (data + instr) per call"),
    "sim_ll_miss_pct": _m("%", "callgrind", "lower", "simulated last-level data misses / data accesses"),
    "sim_d1_traffic_ratio": _m("x", "callgrind", "lower",
                               "bytes moved into L1 (misses x line size) / minimum bytes of the operation"),
    "sim_branches": _m("count/call", "callgrind", "", "conditional + indirect branches executed per call"),
    "sim_branch_mispredicts": _m("count/call", "callgrind", "lower", "simulated branch mispredictions per call"),
    "sim_branch_mispredict_pct": _m("%", "callgrind", "lower", "simulated mispredictions / branches"),
    # perf record -e cpu-clock over the region
    "kernel_samples_pct": _m("%", "hotspots", "higher", "share of CPU-time samples inside the candidate's own binary"),
    # static evidence (compiler report, disassembly)
    "vectorized_loops": _m("count", "vectorization", "higher", "loops of the kernel source gcc vectorized"),
    "missed_loops": _m("count", "vectorization", "lower", "loops of the kernel source gcc did not vectorize"),
    "static_instructions": _m("static count", "instruction_mix", "", "instructions in the built kernel's functions"),
    "packed_fp": _m("static count", "instruction_mix", "higher", "packed (SIMD) floating-point instructions"),
    "scalar_fp": _m("static count", "instruction_mix", "lower", "scalar floating-point instructions"),
    "fma": _m("static count", "instruction_mix", "higher", "fused multiply-add instructions"),
    "widest_vector_bits": _m("bits", "instruction_mix", "higher", "widest SIMD register used by FP instructions"),
    # roofline (operation's FLOPs and minimum bytes from the reference, measured machine peaks)
    "achieved_gflops": _m("GFLOP/s", "roofline", "higher", "operation FLOPs / per-call time"),
    "achieved_gbs": _m("GB/s", "roofline", "higher", "operation minimum bytes / per-call time"),
    "arithmetic_intensity": _m("FLOP/byte", "roofline", "", "operation FLOPs / minimum bytes"),
    "roofline_pct": _m("%", "roofline", "higher", "achieved GFLOP/s / attainable GFLOP/s at this intensity"),
}


def metric(name: str, value: float, source: str, unit: str | None = None) -> dict[str, Any]:
    """One metric entry; the unit defaults to the catalog's."""
    spec = DEFAULT_CPU_METRICS.get(name)
    return {"value": float(value), "unit": unit or (spec.unit if spec else "count"), "source": source}


def unavailable(reason: str) -> dict[str, str]:
    return {"status": "unavailable", "reason": reason}


def better_direction(name: str) -> str:
    spec = DEFAULT_CPU_METRICS.get(name)
    return spec.better if spec else ""
