"""Nsight Compute (``ncu``): collect -> parse -> render.

Collect: the sandboxed worker runs under ``ncu --profile-from-start off``, so only the kernels
launched between cudaProfilerStart/Stop (``gpu_worker.profile_region``) are profiled, with the
curated metric set (``metrics.DEFAULT_GPU_METRICS``) plus validated extras, into a report file;
``ncu --import REPORT --csv --page raw --print-units base`` then turns it into CSV. One ncu run at
a time on this machine (``exclusive``: each run replays every kernel once per metric pass and
locks the GPU's clocks, so two runs would disturb each other), each under its own timeout.

Parse: the raw page is a wide table: a header row of column names (launch identity columns, then
one column per metric), a units row, then one row per profiled kernel launch. Numbers may carry
thousands separators. ``n/a`` means ncu could not collect that metric for that launch.

Render: a per-kernel table and the Speed-of-Light / occupancy / stall summary for the prompt.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import io
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pragma.graph.context import data_dir
from pragma.tools.profilers.metrics import DEFAULT_GPU_METRICS, metric

log = logging.getLogger(__name__)

SOURCE = "Nsight Compute (hardware counters, kernel replay)"
NCU_NAMES = ("ncu", "/usr/local/cuda/bin/ncu", "nv-nsight-cu-cli")
DEFAULT_METRICS: tuple[str, ...] = tuple(n for n, s in DEFAULT_GPU_METRICS.items() if s.tool == "ncu")
MAX_LAUNCHES = 64  # profiled launches per run: enough for a few forward calls of multi-kernel candidates
MAX_EXTRA = 8
# unit__counter[.rollup[.submetric]]: ncu's metric grammar; anything else never reaches the command line.
METRIC_NAME = re.compile(r"^[a-z][a-z0-9]*__[a-z0-9_]+(\.[a-z0-9_]+){0,3}$")
IDENTITY_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)
TIME_TO_US = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
    "s": 1e6,
}
BYTES = {
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "Tbyte": 1e12,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "KiB": 1024.0,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
}
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


# --- collect ------------------------------------------------------------------------------------


def ncu_binary() -> str | None:
    for name in NCU_NAMES:
        if path := shutil.which(name):
            return path
    return None


@functools.lru_cache(maxsize=4)
def available_metrics(ncu: str, timeout_s: float = 120.0) -> frozenset[str] | None:
    """Base metric names ncu offers for this machine's GPU (``--query-metrics``), or None if the
    query failed (then every requested metric is tried and ncu's own error decides)."""
    try:
        proc = subprocess.run([ncu, "--query-metrics", "--csv"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("ncu --query-metrics failed: %s", exc)
        return None
    names = frozenset(
        m.group(1)
        for line in proc.stdout.splitlines()
        if (m := re.match(r'^"?([a-z][a-z0-9]*__[a-z0-9_]+)"?[,\s]', line))
    )
    return names or None


def base_name(name: str) -> str:
    return name.split(".", 1)[0]


def select_metrics(requested: list[str], available: frozenset[str] | None) -> tuple[list[str], list[str]]:
    """(metrics to collect, metrics this GPU/ncu does not offer); order kept, duplicates dropped."""
    wanted = list(dict.fromkeys(requested))
    if available is None:
        return wanted, []
    return [m for m in wanted if base_name(m) in available], [m for m in wanted if base_name(m) not in available]


@dataclass
class ExtraRequest:
    """The Conductor's extra metrics for ncu: accepted names, already-collected ones, rejections."""

    metrics: list[str] = field(default_factory=list)
    already_default: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "default": self.already_default, "rejected": self.rejected}


def resolve_extra(names: list[str]) -> ExtraRequest:
    req = ExtraRequest()
    for raw in names:
        name = str(raw).strip()
        if not name:
            continue
        if name in DEFAULT_GPU_METRICS:
            req.already_default.append(name)
        elif len(req.metrics) >= MAX_EXTRA:
            req.rejected[name[:80]] = f"more than {MAX_EXTRA} extra metrics requested"
        elif METRIC_NAME.match(name):
            req.metrics.append(name)
        else:
            req.rejected[name[:80]] = "not an Nsight Compute metric name (unit__counter.rollup)"
    return req


def command_prefix(
    ncu: str, metrics: list[str], report: Path, log_file: Path, max_launches: int = MAX_LAUNCHES
) -> list[str]:
    """ncu in front of the worker: only the profiler-start/stop range, child processes followed
    (the sandbox starts the worker through a shell), caches flushed and clocks at base between
    replay passes (ncu's defaults, stated so runs compare)."""
    return [
        ncu,
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--replay-mode",
        "kernel",
        "--cache-control",
        "all",
        "--clock-control",
        "base",
        "--launch-count",
        str(max_launches),
        "--metrics",
        ",".join(metrics),
        "--export",
        str(report),
        "--force-overwrite",
        "--log-file",
        str(log_file),
    ]


def export_csv(ncu: str, report: Path, timeout_s: float = 120.0) -> tuple[str | None, str]:
    """(CSV text of the raw page, why not)."""
    path = report if report.suffix == ".ncu-rep" else report.with_name(report.name + ".ncu-rep")
    if not path.exists():
        return None, f"ncu wrote no report ({path.name})"
    try:
        proc = subprocess.run(
            [ncu, "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"ncu --import failed: {exc}"
    if proc.returncode != 0 or '"ID"' not in proc.stdout:
        return None, f"ncu --import failed: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return proc.stdout, ""


@contextlib.contextmanager
def exclusive(timeout_s: float) -> Iterator[float]:
    """Hold the machine-wide ncu lock (waits up to ``timeout_s``); yields the seconds waited."""
    path = data_dir() / "locks" / "ncu.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start > timeout_s:
                    raise TimeoutError(f"another Nsight Compute run held {path} for {timeout_s:.0f} s") from None
                time.sleep(0.2)
        try:
            yield time.monotonic() - start
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def diagnose_log(text: str) -> dict[str, Any] | None:
    """What went wrong in an ncu run, from its log: counters not permitted, nothing profiled,
    unknown metrics, or another ==ERROR== line. None when the log reports no problem."""
    if "ERR_NVGPUCTRPERM" in text:
        return {
            "kind": "counters_not_permitted",
            "reason": "ERR_NVGPUCTRPERM: this user may not read the GPU's performance counters (the driver "
            "restricts them to admin users; see NVIDIA's ERR_NVGPUCTRPERM page, e.g. the "
            "nvidia module option NVreg_RestrictProfilingToAdminUsers=0)",
        }
    if "No kernels were profiled" in text:
        return {"kind": "no_kernels", "reason": "ncu profiled no kernels in the cudaProfilerStart/Stop range"}
    unknown = re.findall(
        r"(?:Failed to find metric|[Uu]nknown metric|[Ii]nvalid metric)[^\n]*?"
        r"([a-z][a-z0-9]*__[a-z0-9_.]+)",
        text,
    )
    if unknown:
        return {
            "kind": "unknown_metric",
            "reason": f"ncu does not know {', '.join(dict.fromkeys(unknown))}",
            "metrics": list(dict.fromkeys(unknown)),
        }
    errors = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
    if errors:
        return {"kind": "error", "reason": errors[0][:300]}
    return None


# --- parse --------------------------------------------------------------------------------------


def number(text: str) -> float | None:
    """ncu's number text (thousands separators, n/a) as a float, or None."""
    cleaned = text.strip().replace(",", "")
    if cleaned in ("", "n/a", "N/A", "-"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def convert(value: float, unit: str) -> tuple[float, str]:
    """Times to microseconds, byte counts to bytes; everything else as ncu reports it."""
    if unit in TIME_TO_US:
        return value * TIME_TO_US[unit], "us"
    if unit in BYTES:
        return value * BYTES[unit], "bytes"
    return value, unit


def parse(text: str) -> dict[str, Any]:
    """Raw-page CSV -> ``{"launches": [{"id", "kernel", "stream", "block", "grid", "cc", "metrics":
    {name: {"value", "unit"}}}], "metric_names": [...], "missing": {name: launches without a value}}``."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # drops ==PROF== / ==WARNING== lines
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header_at = next((i for i, r in enumerate(rows) if r[:1] == ["ID"] and "Kernel Name" in r), None)
    if header_at is None:
        return {"launches": [], "metric_names": [], "missing": {}, "error": "no raw-page header in the CSV"}
    header = rows[header_at]
    body = rows[header_at + 1 :]
    units = body[0] if body and not body[0][0].strip() else [""] * len(header)  # the units row has no ID
    data = body[1:] if body and not body[0][0].strip() else body
    col = {name: i for i, name in enumerate(header)}
    metric_cols = [(i, name) for i, name in enumerate(header) if name not in IDENTITY_COLUMNS]
    launches, missing = [], {}
    for r in data:
        if len(r) < len(header):
            continue
        values = {}
        for i, name in metric_cols:
            v = number(r[i])
            if v is None:
                missing[name] = missing.get(name, 0) + 1
                continue
            value, unit = convert(v, units[i] if i < len(units) else "")
            values[name] = {"value": value, "unit": unit}
        launches.append(
            {
                "id": r[col["ID"]],
                "kernel": r[col["Kernel Name"]],
                "stream": r[col.get("Stream", 0)],
                "block": r[col["Block Size"]] if "Block Size" in col else "",
                "grid": r[col["Grid Size"]] if "Grid Size" in col else "",
                "cc": r[col["CC"]] if "CC" in col else "",
                "metrics": values,
            }
        )
    return {"launches": launches, "metric_names": [n for _, n in metric_cols], "missing": missing}


def _value(launch: dict[str, Any], name: str) -> float | None:
    return (launch["metrics"].get(name) or {}).get("value")


def kernels(parsed: dict[str, Any], calls: int) -> list[dict[str, Any]]:
    """Launches grouped by kernel name, per forward call, most time first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for launch in parsed["launches"]:
        groups.setdefault(launch["kernel"], []).append(launch)
    total_us = sum(_value(la, "gpu__time_duration.sum") or 0.0 for la in parsed["launches"]) or 1.0
    out = []
    for name, group in groups.items():
        us = sum(_value(la, "gpu__time_duration.sum") or 0.0 for la in group)
        first = group[0]
        out.append(
            {
                "name": name[:160],
                "launches_per_call": len(group) / max(1, calls),
                "us_per_call": us / max(1, calls),
                "share_pct": 100.0 * us / total_us,
                "grid": first["grid"],
                "block": first["block"],
                "registers_per_thread": _value(first, "launch__registers_per_thread"),
                "shared_bytes_per_block": (_value(first, "launch__shared_mem_per_block_static") or 0.0)
                + (_value(first, "launch__shared_mem_per_block_dynamic") or 0.0),
                "achieved_occupancy_pct": _weighted(group, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                "sm_pct": _weighted(group, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                "memory_pct": _weighted(group, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
            }
        )
    return sorted(out, key=lambda k: -k["us_per_call"])


def _weighted(launches: list[dict[str, Any]], name: str) -> float | None:
    """Mean of ``name`` over launches, weighted by each launch's duration (a 1 us launch should not
    count as much as a 1 ms one)."""
    pairs = [(v, _value(la, "gpu__time_duration.sum") or 0.0) for la in launches if (v := _value(la, name)) is not None]
    if not pairs:
        return None
    weight = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / weight if weight > 0 else sum(v for v, _ in pairs) / len(pairs)


def to_metrics(parsed: dict[str, Any], calls: int) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(profile metrics, unavailable {name: reason}) per forward call: times and bytes summed over
    launches, launch__* figures of the kernel with the most time, the rest time-weighted."""
    launches = parsed["launches"]
    metrics: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, str] = {}
    if not launches:
        return metrics, {"ncu": parsed.get("error") or "no kernel launches were profiled"}
    table = kernels(parsed, calls)
    dominant = [la for la in launches if la["kernel"][:160] == table[0]["name"]]
    for name in parsed["metric_names"]:
        have = [la for la in launches if _value(la, name) is not None]
        if not have:
            unavailable[name] = "ncu reported n/a for every launch"
            continue
        unit = have[0]["metrics"][name]["unit"]
        if name.startswith("launch__"):
            value = next((v for la in dominant if (v := _value(la, name)) is not None), _value(have[0], name))
        elif name.endswith(".sum"):  # times, bytes and counts add up over the launches of one call
            value = sum(_value(la, name) for la in have) / max(1, calls)
            unit = f"{unit or 'count'}/call"
        else:
            value = _weighted(have, name)
        spec = DEFAULT_GPU_METRICS.get(name)
        metrics[name] = metric(name, value, SOURCE, unit=spec.unit if spec else unit or "count")
    return metrics, unavailable


# --- render -------------------------------------------------------------------------------------


def _v(metrics: dict[str, dict[str, Any]], name: str) -> float | None:
    return metrics.get(name, {}).get("value")


def stalls(metrics: dict[str, dict[str, Any]], top: int = 3) -> list[tuple[str, float]]:
    """The largest warp-stall reasons, (reason, cycles per issued instruction)."""
    found = [
        (n[len(STALL_PREFIX) : -len(STALL_SUFFIX)], m["value"])
        for n, m in metrics.items()
        if n.startswith(STALL_PREFIX) and n.endswith(STALL_SUFFIX)
    ]
    return sorted(found, key=lambda kv: -kv[1])[:top]


def occupancy_limiter(metrics: dict[str, dict[str, Any]]) -> tuple[str, float] | None:
    """The launch resource that allows the fewest resident blocks per SM, and that count."""
    limits = {
        what: v
        for what in ("registers", "shared_mem", "warps", "blocks")
        if (v := _v(metrics, f"launch__occupancy_limit_{what}")) is not None
    }
    return min(limits.items(), key=lambda kv: kv[1]) if limits else None


def _fmt(v: float | None, spec: str = ".3g", suffix: str = "") -> str:
    return "n/a" if v is None else f"{v:{spec}}{suffix}"


def render_summary(metrics: dict[str, dict[str, Any]]) -> str:
    """Speed of light, memory, occupancy, pipes and stalls in a few lines."""
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
    limiter = occupancy_limiter(metrics)
    shared = (_v(metrics, "launch__shared_mem_per_block_static") or 0.0) + (
        _v(metrics, "launch__shared_mem_per_block_dynamic") or 0.0
    )
    lines = [
        f"speed of light: compute {_fmt(_v(metrics, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'), '.0f', '%')}, "
        f"memory {_fmt(_v(metrics, 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'), '.0f', '%')} "
        f"(DRAM {_fmt(_v(metrics, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'), '.0f', '%')}, "
        f"L2 {_fmt(_v(metrics, 'lts__throughput.avg.pct_of_peak_sustained_elapsed'), '.0f', '%')}, "
        f"L2 hit rate {_fmt(_v(metrics, 'lts__t_sector_hit_rate.pct'), '.0f', '%')}); "
        f"DRAM traffic {_fmt((_v(metrics, 'dram__bytes.sum') or 0) / 1e6, '.4g')} MB per call",
        f"occupancy: achieved {_fmt(_v(metrics, 'sm__warps_active.avg.pct_of_peak_sustained_active'), '.0f', '%')} of "
        f"theoretical {_fmt(_v(metrics, 'sm__maximum_warps_per_active_cycle_pct'), '.0f', '%')}"
        + (f", limited by {limiter[0]} ({limiter[1]:.0f} blocks/SM)" if limiter else "")
        + f"; {_fmt(_v(metrics, 'launch__registers_per_thread'), '.0f')} registers/thread, "
        f"{shared:.0f} bytes shared memory/block, {_fmt(_v(metrics, 'launch__waves_per_multiprocessor'), '.3g')} waves",
        f"pipes: tensor {_fmt(tensor, '.0f', '%')}, issue active "
        f"{_fmt(_v(metrics, 'smsp__issue_active.avg.pct_of_peak_sustained_active'), '.0f', '%')}, "
        f"{_fmt(_v(metrics, 'smsp__thread_inst_executed_per_inst_executed.ratio'), '.1f')} of 32 threads active per "
        "instruction",
    ]
    if top := stalls(metrics):
        lines.append(
            "top warp stalls (cycles per issued instruction): "
            + ", ".join(f"{reason} {value:.2f}" for reason, value in top)
        )
    return "\n".join(lines)


def render_kernels(table: list[dict[str, Any]], limit: int = 6) -> str:
    if not table:
        return "kernels: none profiled"
    lines = [
        "| kernel | launches/call | us/call | share | grid | block | regs | smem B | occupancy | SM % | mem % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in table[:limit]:
        lines.append(
            f"| {k['name'][:60]} | {k['launches_per_call']:.3g} | {k['us_per_call']:.4g} | "
            f"{k['share_pct']:.0f}% | {k['grid']} | {k['block']} | {_fmt(k['registers_per_thread'], '.0f')} | "
            f"{k['shared_bytes_per_block']:.0f} | {_fmt(k['achieved_occupancy_pct'], '.0f', '%')} | "
            f"{_fmt(k['sm_pct'], '.0f')} | {_fmt(k['memory_pct'], '.0f')} |"
        )
    if len(table) > limit:
        lines.append(f"(and {len(table) - limit} more kernels)")
    return "\n".join(lines)
