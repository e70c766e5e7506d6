"""perf stat over the kernel's region only (perf's --control fifo), parsed from ``-x,`` output."""

from __future__ import annotations

import shutil
from typing import Any

# Software events work in VMs and containers; hardware ones are tried and marked unavailable.
SOFTWARE_EVENTS = ("task-clock", "page-faults", "context-switches", "cpu-migrations")
HARDWARE_EVENTS = ("cycles", "instructions", "branches", "branch-misses", "cache-references",
                   "cache-misses", "L1-dcache-load-misses", "LLC-load-misses")


def perf_binary() -> str | None:
    return shutil.which("perf")


def command_prefix(ctl_fifo: str, ack_fifo: str, output_path: str, events: list[str]) -> list[str]:
    """perf stat starting with counters off (-D -1); the worker switches them on around the kernel."""
    return [perf_binary() or "perf", "stat", "-x,", "-o", output_path, "-D", "-1",
            "--control", f"fifo:{ctl_fifo},{ack_fifo}", "-e", ",".join(events), "--"]


def default_events(extra: list[str] | None = None) -> list[str]:
    events = list(SOFTWARE_EVENTS) + list(HARDWARE_EVENTS)
    for e in extra or []:
        if e not in events:
            events.append(e)
    return events


def _unit(event: str, unit: str) -> str:
    if unit:
        return unit
    return "count"


def parse(text: str) -> dict[str, dict[str, Any]]:
    """Parse ``perf stat -x,`` lines: value,unit,event,run-time,pct,metric,metric-unit."""
    metrics: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or line.count(",") < 2:
            continue
        fields = line.split(",")
        raw, unit, event = fields[0].strip(), fields[1].strip(), fields[2].strip()
        if not event:
            continue
        if raw in ("<not supported>", "<not counted>"):
            metrics[event] = {"status": "unavailable", "reason": f"perf reports {raw}", "source": "perf stat"}
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        metrics[event] = {"value": value, "unit": _unit(event, unit), "source": "perf stat (kernel region)"}
    cyc, ins = metrics.get("cycles", {}), metrics.get("instructions", {})
    if "value" in cyc and "value" in ins and cyc["value"] > 0:
        metrics["ipc"] = {"value": ins["value"] / cyc["value"], "unit": "instructions/cycle",
                          "source": "perf stat (derived)"}
    return metrics


def has_hardware_counters(metrics: dict[str, dict[str, Any]]) -> bool:
    return any("value" in metrics.get(e, {}) for e in ("cycles", "instructions"))
