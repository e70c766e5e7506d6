"""perf stat over the kernel's region only (perf's --control fifo), parsed from ``-x,`` output.

collect: ``command_prefix`` wraps the sandboxed worker, which switches counting on and off
around the kernel calls (tools/inside/region.py). parse: ``parse`` reads perf's CSV into event rows and
top-down values; ``to_metrics`` normalises them per kernel call. ``<not supported>`` and
``<not counted>`` rows become unavailable entries, never zeros.

CSV layout (perf 6.x, no aggregation): ``value,unit,event,run-time,enabled-%,metric,metric-unit``;
a counter with several metrics continues on lines whose first fields are empty
(``,,,,44.3,%  tma_backend_bound``; newer perf pads one more comma). Event names may hold commas
inside ``pmu/.../`` terms.
"""

from __future__ import annotations

import shutil
from typing import Any

from pragma.tools.profilers import topdown
from pragma.tools.profilers.metrics import metric

# Software events work in VMs and containers; hardware ones are tried and marked unavailable.
SOFTWARE_EVENTS = ("task-clock", "page-faults", "context-switches", "cpu-migrations")
HARDWARE_EVENTS = (
    "cycles",
    "instructions",
    "branches",
    "branch-misses",
    "cache-references",
    "cache-misses",
    "L1-dcache-load-misses",
    "LLC-load-misses",
)
NOT_AVAILABLE = ("<not supported>", "<not counted>")
SOURCE = "perf stat (kernel region)"
TIME_EVENTS = ("task-clock", "cpu-clock")  # perf reports these in msec


def perf_binary() -> str | None:
    return shutil.which("perf")


def default_events(extra: list[str] | None = None) -> list[str]:
    events = list(SOFTWARE_EVENTS) + list(HARDWARE_EVENTS)
    for e in extra or []:
        if e not in events:
            events.append(e)
    return events


def command_prefix(
    ctl_fifo: str, ack_fifo: str, output_path: str, events: list[str], metric_groups: list[str] | None = None
) -> list[str]:
    """perf stat starting with counters off (-D -1); the worker switches them on around the kernel."""
    cmd = [
        perf_binary() or "perf",
        "stat",
        "-x,",
        "-o",
        output_path,
        "-D",
        "-1",
        "--control",
        f"fifo:{ctl_fifo},{ack_fifo}",
        "-e",
        ",".join(events),
    ]
    if metric_groups:
        cmd += ["-M", ",".join(metric_groups)]
    return cmd + ["--"]


def _fields(line: str) -> list[str]:
    """Split one CSV line, re-joining an event name whose ``pmu/a=1,b=2/`` term holds commas."""
    raw = line.split(",")
    fields = raw[:2]
    i = 2
    while i < len(raw):
        field = raw[i]
        if i == 2:
            while field.count("/") % 2 == 1 and i + 1 < len(raw):
                i += 1
                field += "," + raw[i]
        fields.append(field)
        i += 1
    return fields


def _event_key(event: str) -> str:
    """``cpu_core/cycles/`` (hybrid CPUs) -> ``cycles``; other names unchanged."""
    if event.count("/") == 2 and event.endswith("/") and "=" not in event:
        return event.split("/")[1]
    return event


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def parse(text: str) -> dict[str, Any]:
    """``{"events": {name: {value, unit, enabled_pct} | unavailable}, "topdown": {key: pct}}``."""
    events: dict[str, dict[str, Any]] = {}
    tdown: dict[str, float] = {}
    json_keys: set[str] = set()
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or line.count(",") < 2:
            continue
        f = _fields(line.rstrip("\n"))
        raw, unit, event = f[0].strip(), f[1].strip(), f[2].strip()
        if event:
            key = _event_key(event)
            if raw in NOT_AVAILABLE:
                events.setdefault(key, {"status": "unavailable", "reason": f"perf reports {raw}"})
            elif (value := _float(raw)) is not None:
                enabled = _float(f[4]) if len(f) > 4 else None
                prev = events.get(key, {})
                # Hybrid CPUs print one row per core type: the event's count is their sum.
                events[key] = {
                    "value": prev.get("value", 0.0) + value,
                    "unit": unit,
                    "enabled_pct": min(100.0 if enabled is None else enabled, prev.get("enabled_pct", 100.0)),
                }
            metric_fields = f[5:7] if len(f) >= 7 else []
        else:
            metric_fields = f[-2:]  # continuation line: only a metric value and its unit
        if len(metric_fields) == 2 and (pct := _float(metric_fields[0])) is not None:
            if key := topdown.normalize(metric_fields[1]):
                # The json metric (``%  tma_x``) is the group's definition; perf may also print
                # the --topdown shadow value of the same slot counter, which then loses.
                is_json = "%" in metric_fields[1]
                if is_json or key not in json_keys:
                    tdown[key] = pct
                if is_json:
                    json_keys.add(key)
    return {"events": events, "topdown": tdown}


def to_metrics(
    parsed: dict[str, Any], calls: int, region_ms: float, metric_groups: list[str] | None = None
) -> tuple[dict[str, dict], dict[str, str], list[str]]:
    """(metrics per call, unavailable {name: reason}, notes) from ``parse``'s output."""
    calls = max(1, calls)
    metrics: dict[str, dict] = {}
    unavailable: dict[str, str] = {}
    notes: list[str] = []
    multiplexed = []
    for name, row in parsed["events"].items():
        if "value" not in row:
            unavailable[name] = row["reason"]
            continue
        if row["enabled_pct"] < 99.5:
            multiplexed.append(f"{name} {row['enabled_pct']:.0f}%")
        if name in TIME_EVENTS:
            metrics[name] = metric(name, row["value"] / calls, SOURCE, unit="ms/call")
        else:
            unit = f"{row['unit']}/call" if row["unit"] else "count/call"
            metrics[name] = metric(name, row["value"] / calls, SOURCE, unit=unit)
    if multiplexed:
        notes.append("perf multiplexed counters (scaled estimates): " + ", ".join(multiplexed))
    derived = "perf stat (derived)"
    if "task-clock" in metrics and region_ms > 0:
        metrics["cpu_utilization"] = metric(
            "cpu_utilization", metrics["task-clock"]["value"] * calls / region_ms, derived
        )
    for name, num, den, scale in (
        ("ipc", "instructions", "cycles", 1.0),
        ("branch_miss_pct", "branch-misses", "branches", 100.0),
        ("cache_miss_pct", "cache-misses", "cache-references", 100.0),
    ):
        if num in metrics and den in metrics and metrics[den]["value"] > 0:
            metrics[name] = metric(name, scale * metrics[num]["value"] / metrics[den]["value"], derived)
    source = f"perf stat -M {','.join(metric_groups)} (kernel region)" if metric_groups else SOURCE
    for key, pct in parsed["topdown"].items():
        metrics[topdown.metric_name(key)] = metric(topdown.metric_name(key), pct, source, unit="%")
    if metric_groups and not parsed["topdown"]:
        unavailable["topdown"] = f"perf printed no values for metric groups {', '.join(metric_groups)}"
    return metrics, unavailable, notes


def has_hardware_counters(metrics: dict[str, dict[str, Any]]) -> bool:
    return any("value" in metrics.get(e, {}) for e in ("cycles", "instructions"))
