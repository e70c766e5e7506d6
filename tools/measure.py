"""In-sandbox measurement: correctness trials and interleaved timing.

Only the worker process imports this module; it touches candidate objects directly.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def _as_tensors(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _inputs(problem, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    return list(problem.get_inputs())


def compare(ref_out: Any, new_out: Any, atol: float, rtol: float) -> dict[str, Any]:
    """Compare outputs; returns ok, message and the max/mean absolute difference."""
    refs, news = _as_tensors(ref_out), _as_tensors(new_out)
    if len(refs) != len(news):
        return {"ok": False, "message": f"expected {len(refs)} outputs, got {len(news)}"}
    max_abs = mean_abs = 0.0
    for i, (r, n) in enumerate(zip(refs, news, strict=True)):
        if not isinstance(n, torch.Tensor):
            return {"ok": False, "message": f"output {i} is {type(n).__name__}, expected a tensor"}
        if tuple(n.shape) != tuple(r.shape):
            return {"ok": False, "message": f"output {i} shape {tuple(n.shape)}, expected {tuple(r.shape)}"}
        if n.dtype != r.dtype:
            return {"ok": False, "message": f"output {i} dtype {n.dtype}, expected {r.dtype}"}
        if n.device != r.device:
            return {"ok": False, "message": f"output {i} on {n.device}, expected {r.device}"}
        if not n.is_floating_point():  # integer/bool outputs: differences in float64, match exactly
            n, r = n.double(), r.double()
        diff = (n - r).abs()  # fp32 is exact enough to report differences at 1e-4 tolerances
        if diff.numel():
            if not bool(torch.isfinite(diff).all()):
                diff = torch.nan_to_num(diff, nan=0.0, posinf=0.0)  # NaN/Inf agreement is isclose's job
            max_abs = max(max_abs, float(diff.max()))
            mean_abs = max(mean_abs, float(diff.mean(dtype=torch.float64)))
        close = torch.isclose(n, r, atol=atol, rtol=rtol, equal_nan=True)
        if not bool(close.all()):
            bad = int((~close).sum())
            return {"ok": False, "max_abs_diff": max_abs, "mean_abs_diff": mean_abs,
                    "message": f"output {i}: {bad} of {n.numel()} elements differ beyond atol={atol}, rtol={rtol} "
                               f"(max abs diff {max_abs:.3g})"}
    return {"ok": True, "max_abs_diff": max_abs, "mean_abs_diff": mean_abs, "message": "outputs match"}


def _inputs_unchanged(before: list[Any], after: list[Any]) -> bool:
    return all(
        not isinstance(b, torch.Tensor) or torch.equal(b, a) for b, a in zip(before, after, strict=True)
    )


def verify(req: dict[str, Any], workdir: Path, problem, reference, candidate,
           announce: Callable[[Path, str], None]) -> dict[str, Any]:
    atol, rtol, seed = float(req["atol"]), float(req["rtol"]), int(req["seed"])
    checks: list[dict[str, str]] = []
    max_abs = mean_abs = 0.0
    announce(workdir, "check")
    with torch.no_grad():
        for trial in range(int(req["correctness_trials"])):
            inputs = _inputs(problem, seed + 1000 + trial)
            ref_out = reference(*_clone(inputs))
            pristine = _clone(inputs)
            new_out = candidate(*inputs)
            if not _inputs_unchanged(pristine, inputs):
                checks.append({"rule": "inputs_unmodified", "verdict": "fail", "detail": f"trial {trial}"})
                return {"status": "rejected", "message": "rule inputs_unmodified: the candidate modified its inputs",
                        "checks": checks}
            cmp = compare(ref_out, new_out, atol, rtol)
            max_abs = max(max_abs, cmp.get("max_abs_diff", 0.0))
            mean_abs = max(mean_abs, cmp.get("mean_abs_diff", 0.0))
            if not cmp["ok"]:
                return {"status": "mismatch", "message": f"trial {trial}: {cmp['message']}",
                        "max_abs_diff": cmp.get("max_abs_diff", max_abs),
                        "mean_abs_diff": cmp.get("mean_abs_diff", mean_abs), "checks": checks}
        checks.append({"rule": "inputs_unmodified", "verdict": "pass", "detail": ""})
        announce(workdir, "time")
        timing = time_interleaved(reference, candidate, _inputs(problem, seed + 2000),
                                  int(req["warmup_calls"]), int(req["timed_calls"]))
        # A kernel that is right only before timing is wrong.
        announce(workdir, "recheck")
        inputs = _inputs(problem, seed + 3000)
        cmp = compare(reference(*_clone(inputs)), candidate(*inputs), atol, rtol)
        if not cmp["ok"]:
            return {"status": "mismatch", "message": f"after timing: {cmp['message']}",
                    "max_abs_diff": cmp.get("max_abs_diff", 0.0), "checks": checks}
    return {"status": "ok", "message": "correct on all trials", "max_abs_diff": max_abs,
            "mean_abs_diff": mean_abs, "checks": checks, **timing}


def time_interleaved(reference, candidate, inputs: list[Any], warmup: int, timed: int) -> dict[str, Any]:
    """Time A B A B ... on the same inputs; both allocate their outputs the same way (fresh)."""
    ref_inputs, new_inputs = _clone(inputs), _clone(inputs)
    for _ in range(warmup):
        reference(*ref_inputs)
        candidate(*new_inputs)
    ref_ms: list[float] = []
    new_ms: list[float] = []
    for i in range(timed):
        # Alternate who goes first so neither always runs on a cache warmed by the other.
        order = ((reference, ref_inputs, ref_ms), (candidate, new_inputs, new_ms))
        for fn, args, sink in order if i % 2 == 0 else reversed(order):
            t0 = time.perf_counter_ns()
            fn(*args)
            sink.append((time.perf_counter_ns() - t0) / 1e6)
    ref_med, new_med = statistics.median(ref_ms), statistics.median(new_ms)
    return {
        "runtime_ms": new_med,
        "ref_runtime_ms": ref_med,
        "runtime_min_ms": min(new_ms),
        "ref_runtime_min_ms": min(ref_ms),
        "speedup": ref_med / new_med if new_med > 0 else 0.0,
        "samples_ms": {"candidate": new_ms, "reference": ref_ms},
        "num_threads": torch.get_num_threads(),
    }
