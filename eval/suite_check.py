"""Check that a suite's problems can tell a real kernel from a fake one, and time their references.

For every problem: it loads, and its reference outputs on a few seeded input sets and on the
stress variants of those inputs (tools/judging/stress.py: negated, scaled, mixed signs, structure kept)
are not all matched, at the verifier's atol/rtol, by one fixed output (zeros, a constant, any
tensor that ignores the inputs), which is the verifier's own ``tolerance_discriminates`` rule.
A scalar loss is decidable only with the variants; the table says so. Optionally the reference
call is timed at 1 and 2 threads (median of warmed calls), which is how the CPU suite's sizes
were chosen (2-50 ms per call on this 2-core machine).

    pragma eval check eval/suites/cpu [--overrides FILE] [--time] [--json OUT]
    python -m pragma.eval.suite_check eval/suites/cpu [--overrides FILE] [--time] [--json OUT]

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

from pragma.eval.suites import SuiteProblem, load_suite

log = logging.getLogger(__name__)
ATOL = RTOL = 1e-4  # the verifier's defaults (Context.atol / rtol)
TRIALS = 3  # the verifier's default correctness_trials


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
            fakes = {
                "all-zeros": torch.zeros_like(ref),
                "constant mean": torch.full_like(ref, float(ref.double().mean())),
            }
            for label, fake in fakes.items():
                if bool(torch.isclose(fake, ref, atol=atol, rtol=rtol).all()):
                    found.append(f"output {i}: {label}")
        elif bool((ref == 0).all()):  # integer outputs are compared exactly
            found.append(f"output {i}: all-zeros")
    return found


def decidability(
    model: Any, trial_inputs: list[list[Any]], refs: list[Any], seed: int, atol: float = ATOL, rtol: float = RTOL
) -> dict[str, Any]:
    """The verifier's tolerance_discriminates rule, judged the way the judge judges it: across the
    reference outputs ``refs`` of the trials and those of the stress variants of the last trial's
    inputs (the same skip policy and tolerances, ``stress.judgeable``)."""
    import torch

    from pragma.tools.judging import stress

    def reference(inputs: list[Any]) -> tuple[Any, str]:
        try:
            return model(*inputs), ""
        except Exception as exc:
            return None, str(exc)

    judged = [(r, atol, rtol) for r in refs]
    trials_alone = bool(stress.degenerate_across(judged))  # what the problem's own inputs can tell
    variants, skipped = stress.stress_variants(trial_inputs[-1], torch.Generator().manual_seed(seed))
    used = []
    for name, _, out, variant_atol in stress.judgeable(
        variants, reference, stress.output_peak(refs[-1]), atol, skipped
    ):
        used.append(name)
        judged.append((out, variant_atol, rtol))
    why = stress.degenerate_across(judged)
    return {
        "decidable": not why,
        "why": why,
        "needs_stress": trials_alone and not why,
        "stress_used": used,
        "stress_skipped": [f"{s['name']}: {s['reason']}" for s in skipped],
        "structures": stress.describe_structures(trial_inputs[-1]),
    }


def check_problem(
    path: str, *, seed: int = 1234, time_threads: tuple[int, ...] = (), timed_calls: int = 15
) -> dict[str, Any]:
    """Reference output checks and, when asked, per-call timings (ms) at each thread count."""
    import torch

    problem = _module(path)
    torch.manual_seed(seed)
    init = list(problem.get_init_inputs())
    torch.manual_seed(seed)
    model = problem.Model(*init)
    trial_inputs = []
    for t in range(TRIALS):
        torch.manual_seed(seed + 1000 + t)
        trial_inputs.append(list(problem.get_inputs()))
    inputs = trial_inputs[0]
    with torch.no_grad():
        refs = [model(*x) for x in trial_inputs]
        result: dict[str, Any] = {
            "degenerate": degenerate_outputs(refs[0]),
            "output_shapes": [list(t.shape) for t in _tensors(refs[0])],
            **decidability(model, trial_inputs, refs, seed),
        }
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


def check_suite(
    suite: str | Path,
    overrides: str | Path | None = None,
    *,
    time_refs: bool = False,
    on_problem: Any = None,
    patterns: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every problem's figures by name (or only those ``patterns`` match, as load_suite's); a problem
    that cannot load gets ``{"error": ...}``."""
    figures: dict[str, dict[str, Any]] = {}
    for p in load_suite(suite, overrides, patterns):
        started = time.monotonic()
        try:
            res = check_problem(p.path, time_threads=(1, 2) if time_refs else ())
        except Exception as exc:  # the problem's own code failed: report it, go on with the rest
            res = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
        res["check_s"] = round(time.monotonic() - started, 2)
        figures[p.name] = {"category": p.category, **res}
        if on_problem is not None:
            on_problem(p, figures[p.name])
    return figures


def verdict(res: dict[str, Any]) -> str:
    if "error" in res:
        return f"cannot load: {res['error']}"
    if not res["decidable"]:
        return f"not decidable: {res['why']}"
    return "decidable with the stress variants only" if res["needs_stress"] else "decidable"


def render_row(p: SuiteProblem, res: dict[str, Any], console: Any) -> None:
    """One line per problem, printed as it is checked (a 100-problem suite takes minutes)."""
    from rich.markup import escape

    timing = "  ".join(f"{k} {v:.2f}" for k, v in res.items() if k.startswith("ref_"))
    ok = "error" not in res and res["decidable"]
    used = len(res.get("stress_used", []))
    text = f"{p.name:<44} {p.category:<18} {used}/4 variants  {timing + '  ' if timing else ''}{verdict(res)}"
    console.print(
        text if ok else f"[bold red]{escape(text)}[/bold red]", soft_wrap=True, highlight=False, markup=not ok
    )


def summary(figures: dict[str, dict[str, Any]]) -> tuple[str, int]:
    """The closing line and the exit code (1 when a problem cannot load or cannot discriminate)."""
    errors = sum("error" in r for r in figures.values())
    bad = sum("error" not in r and not r["decidable"] for r in figures.values())
    stressed = sum("error" not in r and r["decidable"] and r["needs_stress"] for r in figures.values())
    good = len(figures) - errors - bad
    line = (
        f"{len(figures)} problems: {good} decidable ({stressed} only with the stress variants), "
        f"{bad} not decidable, {errors} failed to load"
    )
    return line, 1 if errors or bad else 0


def write_json(path: Path, figures: dict[str, dict[str, Any]]) -> None:
    # Timings on a shared 2-core machine depend on what else runs: record the load with them.
    meta = {
        "load_average_1m": round(os.getloadavg()[0], 2),
        "timed_calls": 15,
        "cpu_count": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "torch": importlib.metadata.version("torch"),
    }
    path.write_text(json.dumps({"_meta": meta, **figures}, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--overrides", help="JSON/TOML file overriding module-level size globals")
    parser.add_argument("--time", action="store_true", help="also time the reference at 1 and 2 threads")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    console = Console(highlight=False)
    figures = check_suite(
        args.suite, args.overrides, time_refs=args.time, on_problem=lambda p, res: render_row(p, res, console)
    )
    line, code = summary(figures)
    console.print(line, soft_wrap=True)
    if args.json:
        write_json(args.json, figures)
    return code


if __name__ == "__main__":
    sys.exit(main())
