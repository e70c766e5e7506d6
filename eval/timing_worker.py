"""Runs inside the sandbox in place of the verifier's worker: time a problem's reference, or its
``torch.compile`` version against eager PyTorch.

``baselines.py`` starts it through ``sandbox.run_worker(command_prefix=...)``, so it gets the
verifier's isolation (allowlisted environment, rlimits, namespaces, per-phase deadlines); the
verifier's own command follows as arguments and only its last one (the request file) is used.
Protocol as the verifier worker's: phases in ``progress.jsonl``, the answer in ``result.json``.
The timed loops hold the machine's timing slot (``tools/launch/timing_slot.py``; the launcher creates its
file and the sandbox passes ``PRAGMA_TIMING_SLOT_PATH``), so they never overlap another timing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pragma.tools.launch import timing_slot


def _announce(workdir: Path, phase: str) -> None:
    with open(workdir / "progress.jsonl", "a") as f:
        f.write(json.dumps({"phase": phase, "t": time.time()}) + "\n")


def _load(req: dict[str, Any]):
    import torch

    spec = importlib.util.spec_from_file_location("pragma_problem", req["problem_path"])
    problem = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(problem)
    torch.manual_seed(int(req["seed"]))
    init = list(problem.get_init_inputs())
    torch.manual_seed(int(req["seed"]))
    return problem, problem.Model(*init)


def _inputs(problem, seed: int) -> list[Any]:
    import torch

    torch.manual_seed(seed)
    return list(problem.get_inputs())


def _reference(req: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """The reference's time per call as the verifier's judge takes it, by the problem probe's rule
    (``pragma.tools.inside.worker.steady_call_ms``: warm-up until settled and no longer faulting, the LLC
    flushed before each timed call, the median; issue 33): a fixed warm-up of a few calls read the
    64 MiB KernelBench-style ReLU at 13-389 ms where the verifier timed it at 5.6 ms."""
    import torch

    from pragma.tools.inside.worker import flush_bytes, steady_call_ms

    problem, model = _load(req)
    scratch = torch.ones(flush_bytes() // 4)  # before any call: see tools/inside/worker.py's probe
    _announce(workdir, "time")
    inputs = _inputs(problem, int(req["seed"]) + 2000)
    with timing_slot.hold("reference timing"):  # the machine's timing slot (tools/launch/timing_slot.py)
        timing = steady_call_ms(
            lambda: model(*inputs),
            warmup_calls=int(req["warmup_calls"]),
            warmup_s=float(req.get("warmup_s", 0.5)),
            between=lambda: float(scratch.sum()),
            min_calls=int(req["timed_calls"]),
        )
    return {"status": "ok", "ref_ms": timing["median_ms"], "ref_min_ms": timing["min_ms"], "timing": timing}


def _torch_compile(req: dict[str, Any], workdir: Path) -> dict[str, Any]:
    import torch

    problem, model = _load(req)
    _announce(workdir, "build")
    try:
        compiled = torch.compile(model)
        inputs = _inputs(problem, int(req["seed"]) + 1000)
        out = compiled(*inputs)  # the first call compiles (inductor, C++ via g++ on CPU)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        return {
            "status": "unavailable",
            "reason": f"torch.compile failed: {type(exc).__name__}: {first}",
            "log_tail": traceback.format_exc()[-3000:],
        }
    _announce(workdir, "check")
    for trial in range(2):
        inputs = _inputs(problem, int(req["seed"]) + 1000 + trial)
        ref, out = model(*inputs), compiled(*inputs)
        pairs = list(
            zip(
                ref if isinstance(ref, (tuple, list)) else [ref],
                out if isinstance(out, (tuple, list)) else [out],
                strict=False,
            )
        )
        for r, o in pairs:
            if not torch.allclose(o, r, atol=float(req["atol"]), rtol=float(req["rtol"])):
                diff = float((o.double() - r.double()).abs().max())
                return {"status": "mismatch", "reason": f"torch.compile output differs (max abs diff {diff:.3g})"}
    _announce(workdir, "time")
    inputs = _inputs(problem, int(req["seed"]) + 2000)
    eager, fast = [], []
    with timing_slot.hold("torch.compile timing"):  # compiles stay outside the slot, timings inside
        for _ in range(int(req["warmup_calls"])):
            model(*inputs)
            compiled(*inputs)
        # Interleaved rounds, so both see the same background load.
        for i in range(int(req["timed_calls"])):
            order = ((model, eager), (compiled, fast)) if i % 2 == 0 else ((compiled, fast), (model, eager))
            for fn, bucket in order:
                t0 = time.perf_counter_ns()
                fn(*inputs)
                bucket.append((time.perf_counter_ns() - t0) / 1e6)
    return {"status": "ok", "eager_samples_ms": eager, "compiled_samples_ms": fast}


def main(request_path: str) -> int:
    req = json.loads(Path(request_path).read_text())
    workdir = Path(req["workdir"])
    from pragma.tools.launch import landlock

    os.unlink(request_path)
    landlock.confine([str(workdir), *req.get("writable_paths", [])])
    # The verifier's runners' allocator (tools/launch/spawn.py: steady_heap), for eager and compiled alike:
    # with glibc's defaults a 64 MiB output is mapped and faulted in on every call.
    import ctypes

    from pragma.tools.launch.spawn import steady_heap

    steady_heap(ctypes.CDLL(None))
    _announce(workdir, "load_problem")
    import torch

    torch.set_num_threads(int(req["num_threads"]))
    try:
        with torch.no_grad():
            result = _reference(req, workdir) if req["mode"] == "reference" else _torch_compile(req, workdir)
    except BaseException as exc:  # the problem itself failed: say so, never crash
        result = {
            "status": "error",
            "reason": f"{type(exc).__name__}: {str(exc)[:300]}",
            "log_tail": traceback.format_exc()[-3000:],
        }
    _announce(workdir, "done")
    tmp = workdir / "result.json.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, workdir / "result.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
