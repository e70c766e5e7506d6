"""Benchmark: how precise the verifier's speedups are, and what a verification costs beyond compiling.

Run as ``python -m pragma.eval.bench_verifier [--repeats 5] [--json PATH]``.

1. Precision: the same honest kernel (the OpenMP ReLU of ``bench_compile``) is verified
   ``--repeats`` times in a row with default settings (warm-up 5 calls and 0.5 s, 100 timed
   interleaved calls); the spread of the speedup (median of per-round ratios) is reported as
   +-half-range in percent, next to the ratio of minimums and of medians over the same runs, with
   the load average, because on a shared 2-core machine the load decides the figure.
2. Overhead: each verification's phases (static rules, sandbox start with interpreter and torch
   import, problem load, build, correctness and anti-cheat checks, timing, held-out re-check,
   statistics). "Overhead beyond compile" is the wall time minus the build phase; the part of it
   spent inside the timed kernel and reference calls is shown separately.
3. Head-to-head: one more verification with the same kernel as the current best, the cost of the
   acceptance rule, and whether noise crowned an identical kernel (it must not).

A fresh ``PRAGMA_DATA_DIR`` makes the first verification compile; the rest reuse the build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROBLEM_PATH = Path(__file__).resolve().parent / "suites" / "examples" / "relu.py"
PHASES = ("static_checks", "startup", "load_problem", "build", "build_best", "check", "time", "recheck", "teardown",
          "statistics")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pragma.eval.bench_verifier", description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="verifications of the same kernel (default 5)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.repeats < 2:
        parser.error("--repeats must be at least 2")
    return args


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def row_of(i: int, result: dict[str, Any], wall_s: float) -> dict[str, Any]:
    phases = result["phases_s"]
    kernel_s = sum(sum(v) for v in result["samples_ms"].values()) / 1e3
    return {
        "run": i, "status": result["status"], "wall_s": round(wall_s, 3),
        "speedup": round(result["speedup"], 4), "speedup_ci": [round(x, 4) for x in result["speedup_ci"]],
        "speedup_of_minimums": round(result["speedup_of_minimums"], 4),
        "speedup_of_medians": round(result["ref_runtime_ms"] / result["runtime_ms"], 4),
        "runtime_ms": round(result["runtime_ms"], 4), "ref_runtime_ms": round(result["ref_runtime_ms"], 4),
        "phases_s": {k: round(phases.get(k, 0.0), 3) for k in PHASES if k in phases},
        "overhead_beyond_compile_s": round(wall_s - phases.get("build", 0.0) - phases.get("build_best", 0.0), 3),
        "timed_calls_s": round(kernel_s, 3), "warmup_rounds": result["warmup_rounds"],
        "cpu_ratio": {k: round(v, 2) for k, v in result["cpu_ratio"].items()},
    }


def print_row(row: dict[str, Any]) -> None:
    ph = row["phases_s"]
    print(f"{row['run']:>3}  {row['speedup']:>7.3f}  [{row['speedup_ci'][0]:.3f}, {row['speedup_ci'][1]:.3f}]  "
          f"{row['wall_s']:>6.2f}  {ph.get('startup', 0):>7.2f}  {ph.get('build', 0):>6.2f}  "
          f"{ph.get('check', 0):>6.2f}  {ph.get('time', 0):>6.2f}  {ph.get('recheck', 0):>7.2f}  "
          f"{row['overhead_beyond_compile_s']:>8.2f}  {row['timed_calls_s']:>7.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data_dir = tempfile.mkdtemp(prefix="pragma-bench-verifier-")
    os.environ["PRAGMA_DATA_DIR"] = data_dir  # before pragma reads it: builds start cold
    from pragma.eval.bench_compile import candidate_source
    from pragma.graph.context import resolve_context
    from pragma.tools.stats import spread_pct
    from pragma.tools.verify import verify_candidate

    ctx = resolve_context()  # defaults on purpose: the figures are what a run pays
    code = candidate_source("fast", f"bench_verifier_{os.getpid()}")
    load_start = load_avg()
    print(f"problem {PROBLEM_PATH}\ncpus {os.cpu_count()}, num_threads {ctx.num_threads}, warm-up "
          f"{ctx.warmup_calls} calls + {ctx.warmup_s} s, {ctx.timed_calls} timed calls, "
          f"{ctx.correctness_trials} correctness trials")
    print(f"load average at start (1/5/15 min): {load_start}\n")
    print("run  speedup  95% CI            wall_s  startup  build   check   time    recheck  "
          "beyond_compile  in_calls")
    rows: list[dict[str, Any]] = []
    try:
        for i in range(args.repeats):
            t0 = time.monotonic()
            result = verify_candidate(str(PROBLEM_PATH), code, ctx)
            wall_s = time.monotonic() - t0
            if result["status"] != "ok":
                print(f"run {i} ended with {result['status']}: {result['message']}", file=sys.stderr)
                return 1
            rows.append(row_of(i, result, wall_s))
            print_row(rows[-1])
        t0 = time.monotonic()
        h2h = verify_candidate(str(PROBLEM_PATH), code, ctx, best_code=code)
        h2h_row = {**row_of(args.repeats, h2h, time.monotonic() - t0),
                   "speedup_vs_best": round(h2h["speedup_vs_best"], 4),
                   "speedup_vs_best_ci": [round(x, 4) for x in h2h["speedup_vs_best_ci"]],
                   "is_new_best": h2h["is_new_best"], "acceptance": h2h["acceptance"]}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    load_end = load_avg()
    speedups = [r["speedup"] for r in rows]
    warm = rows[1:]  # the first run compiled; the others reused the build
    figures = {
        "problem": str(PROBLEM_PATH), "cpus": os.cpu_count(), "repeats": args.repeats,
        "context": {"num_threads": ctx.num_threads, "warmup_calls": ctx.warmup_calls, "warmup_s": ctx.warmup_s,
                    "timed_calls": ctx.timed_calls, "correctness_trials": ctx.correctness_trials},
        "load_avg_start": load_start, "load_avg_end": load_end, "rows": rows, "head_to_head": h2h_row,
        "median_speedup": round(statistics.median(speedups), 4),
        "speedup_spread_pct": round(spread_pct(speedups), 2),
        "speedup_of_minimums_spread_pct": round(spread_pct([r["speedup_of_minimums"] for r in rows]), 2),
        "speedup_of_medians_spread_pct": round(spread_pct([r["speedup_of_medians"] for r in rows]), 2),
        "median_ci_width_pct": round(statistics.median(
            (r["speedup_ci"][1] - r["speedup_ci"][0]) / r["speedup"] * 100 for r in rows), 2),
        "median_overhead_beyond_compile_s": round(statistics.median(r["overhead_beyond_compile_s"] for r in warm), 3),
        "median_phases_s": {k: round(statistics.median(r["phases_s"].get(k, 0.0) for r in warm), 3) for k in PHASES
                            if any(k in r["phases_s"] for r in warm)},
        "first_build_s": rows[0]["phases_s"].get("build", 0.0),
    }
    print(f"\nprecision: median speedup {figures['median_speedup']:.3f}x over {args.repeats} runs, spread "
          f"+-{figures['speedup_spread_pct']:.1f}% (half-range / median); median 95% CI width "
          f"{figures['median_ci_width_pct']:.1f}% of the speedup")
    print(f"  (other estimators over the same runs: ratio of minimums +-"
          f"{figures['speedup_of_minimums_spread_pct']:.1f}%, ratio of medians +-"
          f"{figures['speedup_of_medians_spread_pct']:.1f}%)")
    print(f"overhead beyond compile (runs 2..{args.repeats}, build cached): median "
          f"{figures['median_overhead_beyond_compile_s']:.2f} s per candidate; phases "
          + ", ".join(f"{k} {v:.2f}s" for k, v in figures["median_phases_s"].items()))
    print(f"first build (cold compile): {figures['first_build_s']:.2f} s")
    print(f"head-to-head with an identical best: wall {h2h_row['wall_s']:.2f} s, speedup vs best "
          f"{h2h_row['speedup_vs_best']:.3f} CI {h2h_row['speedup_vs_best_ci']}, {h2h_row['acceptance']}")
    print(f"load average at end (1/5/15 min): {load_end}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
