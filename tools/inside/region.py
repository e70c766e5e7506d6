"""In-sandbox profiled region: the kernel run ``profile_calls`` times between profiler on/off switches.

Only the worker process imports this module. The switches make every tool count the kernel
alone, not process start, torch import or the build:

- perf (stat or record): ``enable``/``disable`` on perf's ``--control`` fifo, acknowledged;
- callgrind: client requests from a tiny helper library (``callgrind_helper`` in the request)
  start instrumentation, warm the simulated caches with one uncounted call, zero the counters,
  and stop instrumentation after the last call that fits the simulation's time budget.

It also measures the operation itself (``op_cost``): FLOPs and minimum bytes of the reference
on the profiled inputs, for the roofline; and, with counting switched off, a micro-experiment
that answers a question cheaply (``micro``): calls after a cache flush against warm calls (is the
warm loop served from a cache?). An alignment experiment (inputs off a 64-byte line) is not run
here: a kernel using aligned vector loads would crash the profiled process and lose the profile.
"""

from __future__ import annotations

import ctypes
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pragma.tools.inside.loading import seeded_inputs

# FLOPs per input element for non-matmul ops flop_counter has no formula for (estimates: a
# transcendental counts as one FLOP). Pointwise ops count one FLOP per output element.
PER_ELEMENT_FLOPS = {
    "_softmax": 4,
    "_log_softmax": 4,
    "native_layer_norm": 7,
    "native_batch_norm": 6,
    "_native_batch_norm_legit_no_training": 4,
    "native_group_norm": 7,
    "_to_copy": 0,
    "copy_": 0,
    "clone": 0,
}


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def operation_cost(problem, seed: int, inputs: list[Any]) -> dict[str, Any]:
    """FLOPs (torch's formulas for matmul-like ops, estimates otherwise) and compulsory bytes
    (read every input and parameter once, write every output once) of the reference."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    by_op: Counter[str] = Counter()
    methods: set[str] = set()

    class OpCounter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet, name = func._overloadpacket, func._overloadpacket.__name__
            first = next(iter(_tensors(list(args))), None)
            if packet in flop_registry:
                flops, method = flop_registry[packet](*args, **kwargs, out_val=out), "formula"
            elif torch.Tag.pointwise in func.tags:
                flops, method = sum(t.numel() for t in _tensors(out)), "estimate"
            elif torch.Tag.reduction in func.tags and first is not None:
                flops, method = first.numel(), "estimate"
            elif name in PER_ELEMENT_FLOPS and first is not None:
                flops, method = PER_ELEMENT_FLOPS[name] * first.numel(), "estimate"
            else:
                flops, method = 0, ""
            if flops:
                by_op[name] += int(flops)
                methods.add(method)
            return out

    torch.manual_seed(seed)
    init_inputs = list(problem.get_init_inputs())
    torch.manual_seed(seed)
    model = problem.Model(*init_inputs)
    args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad(), OpCounter():
        out = model(*args)
    seen: set[int] = set()
    read_bytes = 0
    for t in _tensors(args) + list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            read_bytes += _nbytes(t)
    write_bytes = sum(_nbytes(t) for t in _tensors(out) if t.data_ptr() not in seen)
    method = (
        "formula"
        if methods == {"formula"}
        else "estimate"
        if methods == {"estimate"}
        else "mixed"
        if methods
        else "none"
    )
    return {
        "flops": float(sum(by_op.values())),
        "min_bytes": float(read_bytes + write_bytes),
        "read_bytes": float(read_bytes),
        "write_bytes": float(write_bytes),
        "flops_method": method,
        "flops_by_op": dict(by_op.most_common(6)),
    }


class _PerfSwitch:
    """perf's control fifo: counting (or sampling) on and off, each acknowledged by perf."""

    def __init__(self, req: dict[str, Any]):
        self.ctl = open(req["perf_ctl_fifo"], "w") if req.get("perf_ctl_fifo") else None
        self.ack = open(req["perf_ack_fifo"]) if req.get("perf_ack_fifo") else None

    def send(self, cmd: str) -> None:
        if self.ctl:
            self.ctl.write(cmd + "\n")
            self.ctl.flush()
            self.ack.readline()  # perf answers "ack" once the counters really switched


def _simulate(req: dict[str, Any], call: Callable[[], Any]) -> dict[str, Any]:
    """Kernel calls under callgrind: instrumentation on, one warm call to fill the simulated caches,
    counters zeroed, then up to ``profile_calls`` counted calls within ``callgrind_budget_s``.

    Simulation speed varies by orders of magnitude (valgrind emulates some vector instructions lane
    by lane), so the warm call's duration decides how many calls fit; when even one more does not,
    the warm call itself is the (cold-cache) measurement. ``sim_calls`` is what the counts cover.
    """
    cg = ctypes.CDLL(req["callgrind_helper"])
    whole_region = bool(req.get("callgrind_collect_region"))
    budget_s, wanted = float(req.get("callgrind_budget_s", 60.0)), int(req["profile_calls"])
    t0 = time.monotonic()
    cg.pragma_cg_start()
    if whole_region:  # no compiled entry point to toggle on: collect the whole calls
        cg.pragma_cg_toggle()
    call()
    warm_s = time.monotonic() - t0
    counted, is_warm = 1, False
    if warm_s * 2 < budget_s:
        cg.pragma_cg_zero()
        counted, is_warm = 0, True
        while counted < wanted and (counted == 0 or time.monotonic() - t0 + warm_s < budget_s):
            call()
            counted += 1
    if whole_region:
        cg.pragma_cg_toggle()
    cg.pragma_cg_stop()
    region_ms = (time.monotonic() - t0) * 1e3
    return {
        "sim_calls": counted,
        "sim_warm_caches": is_warm,
        "sim_warm_call_s": round(warm_s, 3),
        "calls": counted,
        "region_ms": region_ms,
        "per_call_ms": region_ms / (counted + 1),
    }


def profile_region(
    req: dict[str, Any], workdir: Path, problem, candidate, announce: Callable[[Path, str], None]
) -> dict[str, Any]:
    """Run the kernel ``profile_calls`` times between the profiler's on/off switches."""
    seed = int(req["seed"])
    inputs = seeded_inputs(problem, seed + 4000)
    calls = int(req["profile_calls"])
    result: dict[str, Any] = {"status": "ok", "message": "profiled", "calls": calls}
    if req.get("op_cost"):
        try:
            result["op_cost"] = operation_cost(problem, seed, inputs)
        except Exception as exc:  # the roofline is optional; the profile is not
            result["op_cost_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    flush_bytes = 0 if req.get("callgrind_helper") else int(req.get("micro_flush_bytes") or 0)
    # Allocated before the first call, so the profiled loop and the experiments run against the
    # same allocator state (a 64 MiB allocation later made a kernel's fresh outputs fault 8x slower).
    scratch = torch.ones(flush_bytes // 4) if flush_bytes else None
    with torch.no_grad():
        for _ in range(int(req["warmup_calls"])):
            candidate(*inputs)
        announce(workdir, "profile")
        if req.get("callgrind_helper"):
            return {**result, **_simulate(req, lambda: candidate(*inputs))}
        perf = _PerfSwitch(req)
        perf.send("enable")
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            candidate(*inputs)
        region_ms = (time.perf_counter_ns() - t0) / 1e6
        perf.send("disable")
        per_call_ms = region_ms / max(1, calls)
        if scratch is not None:
            result["micro"] = micro_experiments(candidate, inputs, per_call_ms, scratch)
    return {**result, "region_ms": region_ms, "per_call_ms": per_call_ms}


MICRO_CALLS = 5  # per variant: medians of 5 keep the experiment under a second for 50 ms kernels
MICRO_MAX_CALL_MS = 250.0  # slower kernels skip them (6 more calls would cost seconds)


def _block_ms(call: Callable[[], Any], before: Callable[[], Any] | None = None) -> float:
    """Median ms of ``MICRO_CALLS`` calls after one untimed call (``before`` runs untimed each time)."""
    call()
    samples = []
    for _ in range(MICRO_CALLS):
        if before is not None:
            before()
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return sorted(samples)[len(samples) // 2]


def micro_experiments(candidate: Callable, inputs: list[Any], warm_ms: float, scratch: torch.Tensor) -> dict[str, Any]:
    """Cold against warm calls (medians of a few calls each).

    ``scratch`` is a float32 buffer twice the last-level cache: reading it evicts the kernel's data.
    """
    if warm_ms > MICRO_MAX_CALL_MS:
        return {"status": "skipped", "reason": f"a call takes {warm_ms:.0f} ms (limit {MICRO_MAX_CALL_MS:.0f} ms)"}
    out: dict[str, Any] = {"status": "ok", "calls_each": MICRO_CALLS}
    t0 = time.perf_counter_ns()
    flush_bytes = scratch.numel() * 4
    # Warm: calls back to back. Cold: each call after reading a buffer twice the last-level cache
    # (a read leaves clean lines: no write-back traffic competing with the timed call).
    warm = _block_ms(lambda: candidate(*inputs))
    cold = _block_ms(lambda: candidate(*inputs), before=lambda: float(scratch.sum()))
    out.update(warm_ms=warm, cold_ms=cold, cold_warm_ratio=cold / warm if warm > 0 else 0.0, flush_bytes=flush_bytes)
    out["cost_s"] = round((time.perf_counter_ns() - t0) / 1e9, 3)
    out["traffic"] = traffic_experiment(candidate, inputs)
    return out


def traffic_experiment(candidate: Callable, inputs: list[Any]) -> dict[str, Any]:
    """Is moving the bytes the limit? Median times of only writing the kernel's outputs (torch
    ``fill_``: plain stores, each line read for ownership first) and of only reading its input
    tensors (``sum``), on the same tensors, warm like the profiled loop; set against the kernel's
    warm time (tools/profilers/micro.py decides). Parameters are not counted: inputs only."""
    t0 = time.perf_counter_ns()
    outs = candidate(*inputs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    written = [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel()]
    read = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()]
    if not written or not read:
        return {"status": "skipped", "reason": "the kernel's inputs or outputs are not floating-point tensors"}
    write_ms = _block_ms(lambda: [o.fill_(0.5) for o in written])
    read_ms = _block_ms(lambda: [x.sum() for x in read])
    return {
        "status": "ok",
        "write_ms": write_ms,
        "read_ms": read_ms,
        "write_bytes": sum(o.numel() * o.element_size() for o in written),
        "read_bytes": sum(x.numel() * x.element_size() for x in read),
        "cost_s": round((time.perf_counter_ns() - t0) / 1e9, 3),
    }
