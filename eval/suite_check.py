"""Check that a suite's problems can tell a real kernel from a fake one, and time their references.

For every problem: the reference output on seeded inputs must not be matched (at the verifier's
atol/rtol) by an all-zeros tensor, nor by a constant equal to its mean; optionally the reference
call is timed at 1 and 2 threads (median of warmed calls), which is how the CPU suite's sizes
were chosen (2-50 ms per call on this 2-core machine).

    python -m pragma.eval.suite_check eval/suites/cpu [--time] [--json OUT]

Problems run in this process: use it on suites you trust (the harness itself runs problems only
in the sandbox).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pragma.eval.suites import load_suite

log = logging.getLogger(__name__)
ATOL = RTOL = 1e-4  # the verifier's defaults (Context.atol / rtol)


def _module(path: str):
    spec = importlib.util.spec_from_file_location(f"suite_problem_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def degenerate_outputs(output: Any, atol: float = ATOL, rtol: float = RTOL) -> list[str]:
    """Which constant fakes (all-zeros, the mean) match ``output`` within tolerance; [] is good."""
    import torch

    found = []
    for i, ref in enumerate(_tensors(output)):
        if ref.is_floating_point():
            fakes = {"all-zeros": torch.zeros_like(ref), "constant mean": torch.full_like(ref, float(ref.double().mean()))}
            for label, fake in fakes.items():
                if bool(torch.isclose(fake, ref, atol=atol, rtol=rtol).all()):
                    found.append(f"output {i}: {label}")
        elif bool((ref == 0).all()):  # integer outputs are compared exactly
            found.append(f"output {i}: all-zeros")
    return found


def check_problem(path: str, *, seed: int = 1234, time_threads: tuple[int, ...] = (),
                  timed_calls: int = 15) -> dict[str, Any]:
    """Reference output checks and, when asked, per-call timings (ms) at each thread count."""
    import torch

    problem = _module(path)
    torch.manual_seed(seed)
    init = list(problem.get_init_inputs())
    torch.manual_seed(seed)
    model = problem.Model(*init)
    torch.manual_seed(seed + 1000)  # the verifier's first correctness trial uses seed + 1000
    inputs = list(problem.get_inputs())
    with torch.no_grad():
        out = model(*inputs)
        result: dict[str, Any] = {"degenerate": degenerate_outputs(out),
                                  "output_shapes": [list(t.shape) for t in _tensors(out)]}
        previous = torch.get_num_threads()
        for n in time_threads:
            torch.set_num_threads(n)
            for _ in range(3):
                model(*inputs)
            samples = []
            for _ in range(timed_calls):
                t0 = time.perf_counter()
                model(*inputs)
                samples.append((time.perf_counter() - t0) * 1e3)
            result[f"ref_ms_{n}t"] = round(statistics.median(samples), 3)
            # The fastest call is what an unloaded machine gives; the median shows the load.
            result[f"ref_min_ms_{n}t"] = round(min(samples), 3)
        torch.set_num_threads(previous)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--time", action="store_true", help="also time the reference at 1 and 2 threads")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    figures: dict[str, Any] = {}
    bad = 0
    for p in load_suite(args.suite):
        res = check_problem(p.path, time_threads=(1, 2) if args.time else ())
        figures[p.name] = {"category": p.category, **res}
        bad += bool(res["degenerate"])
        timing = "  ".join(f"{k} {v:8.2f}" for k, v in res.items() if k.startswith("ref_"))
        log.info("%-26s %-18s %s %s", p.name, p.category, timing, "; ".join(res["degenerate"]) or "ok")
    if args.json:
        # Timings on a shared 2-core machine depend on what else runs: record the load with them.
        meta = {"load_average_1m": round(os.getloadavg()[0], 2), "timed_calls": 15, "cpu_count": os.cpu_count(),
                "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "torch": importlib.metadata.version("torch")}
        args.json.write_text(json.dumps({"_meta": meta, **figures}, indent=1, sort_keys=True) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
