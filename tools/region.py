"""In-sandbox profiled region: the kernel run ``profile_calls`` times between profiler on/off switches.

Only the worker process imports this module. Profiler-specific switches (perf's control fifo)
are driven from here so the counts cover the kernel alone, not process start or torch import.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pragma.tools.measure import _inputs


def profile_region(req: dict[str, Any], workdir: Path, problem, candidate,
                   announce: Callable[[Path, str], None]) -> dict[str, Any]:
    """Run the kernel ``profile_calls`` times between perf's enable/disable control commands."""
    inputs = _inputs(problem, int(req["seed"]) + 4000)
    calls = int(req["profile_calls"])
    ctl = req.get("perf_ctl_fifo")
    ack = req.get("perf_ack_fifo")
    with torch.no_grad():
        for _ in range(int(req["warmup_calls"])):
            candidate(*inputs)
        announce(workdir, "profile")
        ctl_f = open(ctl, "w") if ctl else None
        ack_f = open(ack) if ack else None

        def command(cmd: str) -> None:
            if ctl_f:
                ctl_f.write(cmd + "\n")
                ctl_f.flush()
                ack_f.readline()  # perf answers "ack" once the counters really switched

        command("enable")
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            candidate(*inputs)
        region_ms = (time.perf_counter_ns() - t0) / 1e6
        command("disable")
    return {"status": "ok", "message": "profiled", "region_ms": region_ms, "calls": calls,
            "per_call_ms": region_ms / max(1, calls)}
