"""Benchmark: seconds the Profiler spends on one verified candidate, per tool, on this machine.

Run as ``python -m pragma.eval.bench_profiler [--simulate auto|always|never] [--only NAME ...] [--json PATH]``.

Each candidate is verified first (untimed; as in the loop, the verifier has built the kernel
before the profiler sees it), then profiled with the run's default settings. The figures are
the profile's own ``tools`` timings (perf stat run, perf record run, callgrind run, vectorization
report, peaks) and its total wall time. The machine's peaks are measured once up front, in a
fresh data dir, and reported separately (a run pays that once per machine).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("pragma.bench_profiler")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "eval" / "suites" / "examples"
FIXTURES = ROOT / "tests" / "data"
# (name, problem, candidate): the memory-bound / compute-bound pair, and one pair per fallback.
CASES = [
    ("relu_fast", EXAMPLES / "relu.py", FIXTURES / "candidates" / "relu_fast.py"),
    ("matmul_fast", EXAMPLES / "matmul.py", FIXTURES / "candidates" / "matmul_fast.py"),
    ("scale_shift_vector", FIXTURES / "problems" / "scale_shift.py", FIXTURES / "candidates" / "scale_shift_vector.py"),
    ("column_sum_strided", FIXTURES / "problems" / "column_sum.py", FIXTURES / "candidates" / "column_sum_strided.py"),
]
TOOLS = ("perf_stat", "hotspots", "callgrind", "vectorization", "peaks")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pragma.eval.bench_profiler", description=__doc__.splitlines()[0])
    parser.add_argument("--simulate", choices=("auto", "always", "never"), default="auto",
                        help="profile_simulate for the run (default auto: callgrind where counters are missing)")
    parser.add_argument("--only", nargs="*", default=None, help=f"case names among {[c[0] for c in CASES]}")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = parse_args(argv)
    cases = [c for c in CASES if args.only is None or c[0] in args.only]
    data_dir = tempfile.mkdtemp(prefix="pragma-bench-profiler-")
    os.environ["PRAGMA_DATA_DIR"] = data_dir  # before pragma reads it: nothing cached from earlier runs
    from pragma.graph.context import resolve_context
    from pragma.tools import hardware
    from pragma.tools.profilers.cpu import profile_candidate
    from pragma.tools.verify import verify_candidate

    ctx = resolve_context(profile_simulate=args.simulate)
    rows: list[dict[str, Any]] = []
    load_start = [round(x, 2) for x in os.getloadavg()]
    print(f"cpus {os.cpu_count()}, num_threads {ctx.num_threads}, profile_calls {ctx.profile_calls}, "
          f"callgrind_calls {ctx.callgrind_calls}, profile_simulate {ctx.profile_simulate}")
    print(f"load average at start (1/5/15 min): {load_start}")
    try:
        t0 = time.monotonic()
        peak = hardware.peaks()
        peaks_s = time.monotonic() - t0
        print(f"machine peaks measured once in {peaks_s:.1f} s: {json.dumps(peak)}\n")
        print(f"{'candidate':<20} {'total_s':>8} " + " ".join(f"{t:>13}" for t in TOOLS) + "  confidence / bottleneck")
        for name, problem, candidate in cases:
            code = candidate.read_text()
            verdict = verify_candidate(str(problem), code, ctx)
            if verdict["status"] != "ok":
                print(f"{name}: verification failed ({verdict['status']}): {verdict['message'][:200]}", file=sys.stderr)
                return 1
            t0 = time.monotonic()
            profile = profile_candidate(str(problem), code, ctx)
            total_s = time.monotonic() - t0
            tools = profile.get("tools", {})
            per_tool = {t: tools.get(t, {}).get("wall_s") for t in TOOLS}
            rows.append({"candidate": name, "total_s": round(total_s, 2), "tools_s": per_tool,
                         "confidence": profile.get("confidence"), "bottleneck": profile.get("bottleneck"),
                         "callgrind_phases_s": tools.get("callgrind", {}).get("phases_s", {}),
                         "load_avg_1min": round(os.getloadavg()[0], 2)})
            cells = " ".join(f"{v:>13.1f}" if isinstance(v, (int, float)) else f"{'-':>13}" for v in per_tool.values())
            print(f"{name:<20} {total_s:>8.1f} {cells}  {profile.get('confidence')} / {profile.get('bottleneck')}",
                  flush=True)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    load_end = [round(x, 2) for x in os.getloadavg()]
    totals = sorted(r["total_s"] for r in rows)
    median_s = totals[len(totals) // 2] if totals else 0.0
    print(f"\nmedian profiling time per candidate: {median_s:.1f} s (n={len(rows)}); "
          "callgrind overlaps the hot-spot run and the static analysis")
    print(f"load average at end (1/5/15 min): {load_end}")
    if args.json:
        Path(args.json).write_text(json.dumps({"context": {"profile_calls": ctx.profile_calls,
                                                            "callgrind_calls": ctx.callgrind_calls,
                                                            "profile_simulate": ctx.profile_simulate},
                                               "peaks": peak, "peaks_s": round(peaks_s, 2), "rows": rows,
                                               "median_s": median_s, "load_avg_start": load_start,
                                               "load_avg_end": load_end}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
