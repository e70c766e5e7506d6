"""CUDA-event timing helpers (the profiler's GPU region uses ``median_call_ms``; the verifier's verdict
uses the judge's own clock around each call, see docs/verifier.md).

Protocol of one timed call (``events``, the default), the same for reference, best and candidate:
1. flush L2 by overwriting a buffer twice its size, so every call reads its inputs from DRAM
   (otherwise the second of two calls on the same inputs finds them cached);
2. synchronize the device, record the start event;
3. call forward;
4. synchronize the whole device (not just the current stream), then record the end event: work a
   candidate left running on another stream is inside the timed span;
5. elapsed time between the events.
Implementations are interleaved (A B C, B C A, ...) as on the CPU, after ``warmup_calls`` rounds.

``do_bench`` runs triton.testing.do_bench per implementation (the paper's protocol: a few
warm-up calls, then ~``timed_calls`` repetitions, L2 cleared before each), converting the counts to
do_bench's millisecond budgets from a measured per-call estimate. It records its end event on the
current stream only, which is why ``no_side_streams`` is checked before timing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from time import perf_counter_ns, process_time_ns
from typing import Any

import torch

MIN_FLUSH_BYTES = 32 * 2**20
WARMUP_MAX_ROUNDS = 1000


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def flush_buffer(device: Any = None) -> torch.Tensor:
    """A buffer whose overwrite evicts everything from L2 (twice the L2 size, at least 32 MiB)."""
    l2_bytes = int(
        getattr(torch.cuda.get_device_properties(device or torch.cuda.current_device()), "L2_cache_size", 0) or 0
    )
    return torch.empty(max(MIN_FLUSH_BYTES, 2 * l2_bytes), dtype=torch.int8, device="cuda")


def timed_call(fn: Callable, args: list[Any], flush: torch.Tensor) -> tuple[float, float, Any]:
    """(device milliseconds, process CPU milliseconds, output) of one call, per the protocol above."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush.zero_()
    torch.cuda.synchronize()
    c0 = process_time_ns()
    start.record()
    out = fn(*args)
    torch.cuda.synchronize()  # device-wide: side-stream work ends before the end event
    end.record()
    end.synchronize()
    c1 = process_time_ns()
    return start.elapsed_time(end), (c1 - c0) / 1e6, out


def median_call_ms(fn: Callable, inputs: list[Any], repeats: int = 5) -> float:
    flush = flush_buffer()
    args = _clone(inputs)
    with torch.no_grad():
        return statistics.median(timed_call(fn, args, flush)[0] for _ in range(max(1, repeats)))


def time_events(
    impls: list[tuple[str, Callable]], inputs: list[Any], warmup_calls: int, warmup_s: float, timed: int
) -> dict[str, Any]:
    """Interleaved CUDA-event timing; same keys as measure.time_interleaved."""
    args = {name: _clone(inputs) for name, _ in impls}
    flush = flush_buffer()
    k = len(impls)
    start = perf_counter_ns()
    rounds = 0
    while rounds < warmup_calls or ((perf_counter_ns() - start) / 1e9 < warmup_s and rounds < WARMUP_MAX_ROUNDS):
        for name, fn in impls[rounds % k :] + impls[: rounds % k]:
            fn(*args[name])
        rounds += 1
    torch.cuda.synchronize()
    warmup_elapsed_s = (perf_counter_ns() - start) / 1e9
    device_ms: dict[str, list[float]] = {name: [] for name, _ in impls}
    cpu_ms: dict[str, list[float]] = {name: [] for name, _ in impls}
    last: dict[str, Any] = {}
    for i in range(timed):
        for name, fn in impls[i % k :] + impls[: i % k]:
            ms, cpu, out = timed_call(fn, args[name], flush)
            device_ms[name].append(ms)
            cpu_ms[name].append(cpu)
            if i == timed - 1:
                last[name] = out
            del out
    ratio = {n: (sum(cpu_ms[n]) / sum(device_ms[n]) if sum(device_ms[n]) > 0 else 0.0) for n in device_ms}
    return {
        "samples_ms": device_ms,
        "cpu_ratio": ratio,
        "warmup_rounds": rounds,
        "warmup_elapsed_s": warmup_elapsed_s,
        "last_outputs": last,
        "timing_method": "cuda events: L2 flushed, device-wide synchronize before the end event, interleaved",
    }


def time_do_bench(
    impls: list[tuple[str, Callable]], inputs: list[Any], warmup_calls: int, warmup_s: float, timed: int
) -> dict[str, Any]:
    """triton.testing.do_bench per implementation; same keys as measure.time_interleaved."""
    from triton.testing import do_bench

    samples: dict[str, list[float]] = {}
    ratio: dict[str, float] = {}
    last: dict[str, Any] = {}
    started = perf_counter_ns()
    for name, fn in impls:
        args = _clone(inputs)
        estimate_ms = max(median_call_ms(fn, args, repeats=3), 1e-3)
        c0, t0 = process_time_ns(), perf_counter_ns()
        times = do_bench(
            lambda fn=fn, args=args: fn(*args),
            warmup=max(warmup_calls, 1) * estimate_ms,
            rep=max(timed, 1) * estimate_ms,
            return_mode="all",
        )
        c1, t1 = process_time_ns(), perf_counter_ns()
        samples[name] = [float(t) for t in times]
        ratio[name] = (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0
        last[name] = fn(*args)
    torch.cuda.synchronize()
    return {
        "samples_ms": samples,
        "cpu_ratio": ratio,
        "warmup_rounds": warmup_calls,
        "warmup_elapsed_s": (perf_counter_ns() - started) / 1e9,
        "last_outputs": last,
        "timing_method": "triton.testing.do_bench per implementation (L2 cleared; current-stream events)",
    }


def timer_for(method: str) -> Callable[..., dict[str, Any]]:
    return time_do_bench if method == "do_bench" else time_events


def _tensors(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def side_stream_problem(candidate: Callable, inputs: list[Any]) -> str | None:
    """Why the candidate does work outside the current stream, or None.

    Two tests: the launch hook saw a Triton kernel launched on another stream during the checks;
    and an output snapshot taken on the current stream right after forward returns differs from
    the output once the whole device is idle (something else was still writing it).
    """
    from pragma.tools import gpu_worker
    from pragma.tools.inside import guards

    hook = gpu_worker.installed_hook()
    if hook is not None and hook.side_streams:
        return "; ".join(hook.side_streams)
    args = _clone(inputs)
    with torch.no_grad():
        torch.cuda.synchronize()
        out = candidate(*args)
        snap = [t.clone() if isinstance(t, torch.Tensor) else t for t in _tensors(out)]
        torch.cuda.synchronize()
    for i, (now, then) in enumerate(zip(_tensors(out), snap, strict=True)):
        if isinstance(now, torch.Tensor) and not guards.bitwise_equal(now, then):
            return f"output {i} changed after forward returned: work on another CUDA stream was still writing it"
    return None
