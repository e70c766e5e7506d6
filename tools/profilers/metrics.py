"""Every metric the CPU and GPU profilers collect by default, in one place.

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
    tool: (
        str  # collector: timing, perf_stat, topdown, callgrind, hotspots, vectorization, instruction_mix, roofline, mca
    )
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
    # level 2 of the other level-1 classes, on CPUs whose perf splits them (e.g. Sapphire Rapids)
    "topdown_heavy_operations_pct": _m(
        "%", "topdown", "", "level 2: retiring slots of multi-uop/microcoded instructions"
    ),
    "topdown_light_operations_pct": _m("%", "topdown", "higher", "level 2: retiring slots of simple instructions"),
    "topdown_branch_mispredicts_pct": _m("%", "topdown", "lower", "level 2: slots lost to branch mispredictions"),
    "topdown_machine_clears_pct": _m("%", "topdown", "lower", "level 2: slots lost to pipeline clears"),
    "topdown_fetch_latency_pct": _m("%", "topdown", "lower", "level 2: frontend stalls fetching instructions"),
    "topdown_fetch_bandwidth_pct": _m("%", "topdown", "lower", "level 2: frontend delivering too few uops"),
    # callgrind simulation of the kernel alone (inside the kernel's entry call; one thread)
    "sim_instructions": _m("count/call", "callgrind", "lower", "instructions executed by the kernel per call"),
    "sim_data_accesses": _m("count/call", "callgrind", "", "data reads + writes per call (each access any width)"),
    "sim_d1_misses": _m("count/call", "callgrind", "lower", "simulated L1 data cache misses (reads + writes) per call"),
    "sim_d1_miss_pct": _m("%", "callgrind", "lower", "simulated L1 data misses / data accesses"),
    "sim_ll_misses": _m(
        "count/call", "callgrind", "lower", "simulated last-level cache misses (data + instr) per call"
    ),
    "sim_ll_miss_pct": _m("%", "callgrind", "lower", "simulated last-level data misses / data accesses"),
    "sim_d1_traffic_ratio": _m(
        "x", "callgrind", "lower", "bytes moved into L1 (misses x line size) / minimum bytes of the operation"
    ),
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
    "working_set_bytes": _m(
        "bytes", "roofline", "", "bytes one call touches (inputs + outputs): picks the cache level"
    ),
    "roof_gbs": _m("GB/s", "roofline", "", "measured bandwidth of the level the working set fits (L1/L2/L3/DRAM)"),
    # micro-experiments in the profiled process, counting off (tools/inside/region.py)
    "cold_call_ms": _m("ms", "micro", "lower", "one call right after the caches were flushed (median of 5)"),
    "cold_warm_ratio": _m(
        "x", "micro", "", "cold call / warm call: well above 1 means the warm loop is served from a cache"
    ),
    # llvm-mca static analysis of the hot loop (tools/profilers/mca.py)
    "mca_cycles_per_iteration": _m(
        "cycles/iteration", "mca", "lower", "llvm-mca: steady-state cycles per iteration of the hot loop"
    ),
    "mca_ipc": _m("instructions/cycle", "mca", "higher", "llvm-mca: instructions per cycle of the hot loop"),
    "mca_port_pressure_pct": _m("%", "mca", "", "llvm-mca: busiest execution resource's share of the loop's cycles"),
}

_STALL = "warp cycles per issued instruction spent stalled on "
# The GPU profiler (profilers/gpu.py, ncu.py) in Nsight Compute's own metric names, so the
# Conductor can ask ncu for neighbours by the same spelling. Values are per forward call of the
# candidate: times and bytes summed over its kernel launches, %/ratios weighted by kernel time,
# launch__* figures of the kernel that takes the most time.
DEFAULT_GPU_METRICS: dict[str, MetricSpec] = {
    "gpu__time_duration.sum": _m("us/call", "ncu", "lower", "GPU time of the candidate's kernels per call"),
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": _m("%", "ncu", "", "compute speed of light: busiest SM unit"),
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": _m(
        "%", "ncu", "", "memory speed of light: busiest memory unit (DRAM, L2, L1)"
    ),
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": _m("%", "ncu", "", "DRAM bandwidth used, % of peak"),
    "dram__bytes.sum": _m("bytes/call", "ncu", "lower", "bytes moved to and from DRAM per call"),
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": _m("%", "ncu", "", "L2 bandwidth used, % of peak"),
    "lts__t_sector_hit_rate.pct": _m("%", "ncu", "higher", "L2 sector hit rate"),
    "sm__warps_active.avg.pct_of_peak_sustained_active": _m("%", "ncu", "higher", "achieved occupancy"),
    "sm__maximum_warps_per_active_cycle_pct": _m("%", "ncu", "higher", "theoretical occupancy"),
    "launch__occupancy_limit_registers": _m("blocks/SM", "ncu", "", "resident blocks allowed by registers"),
    "launch__occupancy_limit_shared_mem": _m("blocks/SM", "ncu", "", "resident blocks allowed by shared memory"),
    "launch__occupancy_limit_warps": _m("blocks/SM", "ncu", "", "resident blocks allowed by the warp limit"),
    "launch__occupancy_limit_blocks": _m("blocks/SM", "ncu", "", "resident blocks allowed by the block limit"),
    "launch__registers_per_thread": _m("registers/thread", "ncu", "", "registers allocated per thread"),
    "launch__shared_mem_per_block_static": _m("bytes/block", "ncu", "", "static shared memory per block"),
    "launch__shared_mem_per_block_dynamic": _m("bytes/block", "ncu", "", "dynamic shared memory per block"),
    "launch__waves_per_multiprocessor": _m("waves", "ncu", "", "grid size over what the SMs hold at once"),
    "launch__grid_size": _m("blocks", "ncu", "", "blocks in the grid"),
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": _m(
        "%", "ncu", "", "tensor pipe busy, % of active cycles"
    ),
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": _m(
        "%", "ncu", "", "HMMA tensor pipe busy, % of active cycles"
    ),
    "smsp__issue_active.avg.pct_of_peak_sustained_active": _m("%", "ncu", "higher", "cycles a warp instruction issued"),
    "smsp__thread_inst_executed_per_inst_executed.ratio": _m(
        "threads/instruction", "ncu", "higher", "active threads per warp instruction (32 = no divergence)"
    ),
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "lower", _STALL + "global/local memory (L1TEX) results"
    ),
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "lower", _STALL + "shared memory / MIO results"
    ),
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "lower", _STALL + "block-wide barriers"
    ),
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "lower", _STALL + "a full MIO (shared memory) queue"
    ),
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "lower", _STALL + "a full local/global memory queue"
    ),
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "lower", _STALL + "a busy math pipe"
    ),
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "lower", _STALL + "fixed-latency dependencies"
    ),
    "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": _m(
        "cycles/issue", "ncu", "", _STALL + "another eligible warp being picked"
    ),
    "torch_profiler_kernel_ms": _m(
        "ms/call", "torch_profiler", "lower", "device time of the candidate's kernels per call (CUPTI, no counters)"
    ),
}


def _spec(name: str) -> MetricSpec | None:
    return DEFAULT_CPU_METRICS.get(name) or DEFAULT_GPU_METRICS.get(name)


def metric(name: str, value: float, source: str, unit: str | None = None) -> dict[str, Any]:
    """One metric entry; the unit defaults to the catalog's."""
    spec = _spec(name)
    return {"value": float(value), "unit": unit or (spec.unit if spec else "count"), "source": source}


def unavailable(reason: str) -> dict[str, str]:
    return {"status": "unavailable", "reason": reason}


def better_direction(name: str) -> str:
    spec = _spec(name)
    return spec.better if spec else ""
