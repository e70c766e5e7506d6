"""Top-down (TMA) metrics from perf stat: which metric groups this machine has, and their names.

perf prints top-down values as metrics next to counter rows, in three spellings depending on
the CPU and perf version; all map to one set of names (``topdown_<key>_pct``):

- json metrics (``-M TopdownL1``/``TopdownL2``, Intel): metric unit ``%  tma_retiring``;
- the ``--topdown`` shadow metrics (Ice Lake and later): ``Retiring``, ``Bad Speculation``, ...;
- AMD Zen pipeline utilization (``-M PipelineL1``/``PipelineL2``): ``%  frontend_bound``,
  ``backend_bound_memory``, ...

Level 1 splits pipeline slots into retiring / bad speculation / frontend / backend bound;
level 2 splits backend into memory vs core bound (and the others into their two halves).
"""

from __future__ import annotations

import functools
import subprocess

LEVEL1 = ("retiring", "bad_speculation", "frontend_bound", "backend_bound")
LEVEL2 = (
    "memory_bound",
    "core_bound",
    "heavy_operations",
    "light_operations",
    "branch_mispredicts",
    "machine_clears",
    "fetch_latency",
    "fetch_bandwidth",
)
ALIASES = {
    "bad_spec": "bad_speculation",
    "fe_bound": "frontend_bound",
    "be_bound": "backend_bound",
    "branch_mispredict": "branch_mispredicts",
    "heavy_ops": "heavy_operations",
    "backend_bound_memory": "memory_bound",
    "backend_bound_cpu": "core_bound",
    "bad_speculation_mispredicts": "branch_mispredicts",
    "bad_speculation_pipeline_restarts": "machine_clears",
    "frontend_bound_latency": "fetch_latency",
    "frontend_bound_bandwidth": "fetch_bandwidth",
    "retiring_microcode": "heavy_operations",
    "retiring_fastpath": "light_operations",
}
# Metric groups by preference: Intel json names first, AMD's after.
LEVEL1_GROUPS = ("TopdownL1", "TopDownL1", "PipelineL1")
LEVEL2_GROUPS = ("TopdownL2", "TopDownL2", "PipelineL2")


def normalize(metric_unit: str) -> str | None:
    """``'%  tma_backend_bound'`` / ``'Backend Bound'`` / ``'%  backend_bound_memory'`` -> key, or None."""
    text = metric_unit.strip().lstrip("%").strip().lower()
    text = text.removeprefix("tma_").replace(" ", "_").replace("-", "_")
    text = ALIASES.get(text, text)
    return text if text in LEVEL1 or text in LEVEL2 else None


def metric_name(key: str) -> str:
    return f"topdown_{key}_pct"


def pick_groups(available: set[str]) -> list[str]:
    """Level 1 and, where the machine has it, level 2 metric groups to pass to ``perf stat -M``."""
    chosen = []
    for candidates in (LEVEL1_GROUPS, LEVEL2_GROUPS):
        hit = next((g for g in candidates if g in available), None)
        if hit:
            chosen.append(hit)
    return chosen


@functools.lru_cache(maxsize=4)
def available_metric_groups(perf: str) -> frozenset[str]:
    """Metric groups perf knows on this CPU (empty in most VMs, where perf has no event tables)."""
    try:
        proc = subprocess.run([perf, "list", "--raw-dump", "metricgroups"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(proc.stdout.split()) if proc.returncode == 0 else frozenset()


@functools.lru_cache(maxsize=4)
def available_metrics(perf: str) -> frozenset[str]:
    try:
        proc = subprocess.run([perf, "list", "--raw-dump", "metrics"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(proc.stdout.split()) if proc.returncode == 0 else frozenset()
