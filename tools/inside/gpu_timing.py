"""CUDA-event helpers for the profiler's GPU region (``median_call_ms``); the side-stream check is
``gpu_worker.side_stream_problem``.

The verifier's verdict does not use them: since verifier v2 every timed call, on CUDA too, is
timed by the judge's clock around the runner's round trip, and the runner ends each call with a
device-wide ``torch.cuda.synchronize()`` (work left on other streams is inside the span). CUDA
events or ``triton.testing.do_bench`` would run in the candidate's process, where the candidate
could patch them (docs/verifier.md). The interleaved event loop and the do_bench path that used to
live here were removed when nothing called them any more.

Protocol of one profiled call (``timed_call``):
1. flush L2 by overwriting a buffer twice its size, so every call reads its inputs from DRAM;
2. synchronize the device, record the start event;
3. call forward;
4. synchronize the whole device, then record the end event;
5. elapsed time between the events.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from time import process_time_ns
from typing import Any

import torch

from pragma.tools.inside.loading import clone_inputs

MIN_FLUSH_BYTES = 32 * 2**20


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
    args = clone_inputs(inputs)
    with torch.no_grad():
        return statistics.median(timed_call(fn, args, flush)[0] for _ in range(max(1, repeats)))


def _tensors(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]
