"""Benchmark: seconds from a NEW candidate source to a verified result, fast path vs load_inline.

Run as ``python -m pragma.eval.bench_compile [--sources N] [--skip-load-inline] [--json PATH]``.

Both paths build the same OpenMP ReLU for ``eval/suites/examples/relu.py`` and go through the real
verifier (``verify_candidate``: sandbox, build, correctness trials, interleaved timing), so the
figures are what one Coder iteration costs, not a compiler micro-benchmark:

- fast: ``pragma_cext.load_cpp`` (C-ABI shared object via g++, loaded with ctypes);
- inline: KernelBench's ``torch.utils.cpp_extension.load_inline`` with a ``torch::Tensor`` function.

Every source differs (a comment carrying its id) and the run uses a fresh ``PRAGMA_DATA_DIR``, so
nothing is served from a build cache. A re-verify of a fast source that is already built gives the
verifier's own compile-free cost (sandbox start, imports, checks, timing).
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

from pragma.graph.clikit import console, out  # the CLI's consoles: plain text, no markup

PROBLEM_PATH = Path(__file__).resolve().parent / "suites" / "examples" / "relu.py"
SOURCE_ID = "@SOURCE_ID@"

FAST_TEMPLATE = r'''"""ReLU through the fast path: C-ABI shared object built by pragma_cext."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
// benchmark source @SOURCE_ID@ (the id only makes this text, hence its build, unique)
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_bench")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
'''

INLINE_TEMPLATE = r'''"""ReLU in KernelBench's style: torch.utils.cpp_extension.load_inline."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
// benchmark source @SOURCE_ID@ (the id only makes this text, hence its build, unique)
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: expected float32");
    torch::Tensor src = x.contiguous();
    torch::Tensor out = torch::empty_like(src);
    const float* in_ptr = src.data_ptr<float>();
    float* out_ptr = out.data_ptr<float>();
    const int64_t n = src.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out_ptr[i] = in_ptr[i] > 0.f ? in_ptr[i] : 0.f;
    return out;
}
"""

# One extension name per source: torch would otherwise version a reused name (name_v1, ...).
relu_ext = load_inline(
    name="relu_bench_inline_@SOURCE_ID@",
    cpp_sources=CPP_SOURCE,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x)
'''

TEMPLATES = {"fast": FAST_TEMPLATE, "inline": INLINE_TEMPLATE}


def candidate_source(path: str, source_id: str) -> str:
    return TEMPLATES[path].replace(SOURCE_ID, source_id)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pragma.eval.bench_compile",
        description="Time new-source-to-verified-result for the pragma_cext fast path and load_inline.",
    )
    parser.add_argument("--sources", type=int, default=5, help="distinct sources per path (default 5)")
    parser.add_argument(
        "--skip-load-inline",
        action="store_true",
        help="time only the fast path (load_inline takes ~70 s per source here)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.sources < 1:
        parser.error("--sources must be at least 1")
    return args


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def fail(row: dict[str, Any], result: dict[str, Any]) -> None:
    console.out(f"\n{row['path']} source {row['source']} ended with status {result['status']!r}: {result['message']}")
    console.out((result.get("log_tail") or "")[-3000:])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    paths = ["fast"] if args.skip_load_inline else ["fast", "inline"]
    # A fresh data dir puts the cext and torch_extensions build caches (see verify.build_env) in
    # an empty place, so builds from earlier runs cannot be reused. Set before pragma reads it.
    data_dir = tempfile.mkdtemp(prefix="pragma-bench-compile-")
    os.environ["PRAGMA_DATA_DIR"] = data_dir
    from pragma.graph.context import resolve_context
    from pragma.tools.verify import verify_candidate

    # Defaults on purpose: the benchmark measures what a run with default settings pays. The
    # default compile_timeout_s (180 s) leaves room for a ~70-90 s load_inline build on 2 cores.
    ctx = resolve_context()
    # The run token keeps sources unique across runs too, in case the data dir is ever shared.
    run_token = f"{int(time.time())}_{os.getpid()}"
    load_start = load_avg()
    rows: list[dict[str, Any]] = []
    fast_sources: list[str] = []
    out.out(
        f"problem {PROBLEM_PATH}\ndata dir {data_dir}\ncpus {os.cpu_count()}, "
        f"num_threads {ctx.num_threads}, compile_timeout_s {ctx.compile_timeout_s:.0f}, "
        f"timed_calls {ctx.timed_calls}, correctness_trials {ctx.correctness_trials}"
    )
    out.out(f"load average at start (1/5/15 min): {load_start}\n")
    out.out(f"{'#':>2}  {'source':>6}  {'path':<6}  {'wall_s':>8}  {'verifier_s':>10}  {'speedup':>7}  status")
    try:
        # Interleaved (fast, inline, fast, ...) so background load lands on both paths alike.
        for i in range(args.sources):
            for path in paths:
                source_id = f"{run_token}_{i}"
                code = candidate_source(path, source_id)
                t0 = time.monotonic()
                result = verify_candidate(str(PROBLEM_PATH), code, ctx)
                wall_s = time.monotonic() - t0
                row = {
                    "source": i,
                    "path": path,
                    "wall_s": round(wall_s, 3),
                    "verifier_wall_s": round(result["wall_s"], 3),
                    "status": result["status"],
                    "speedup": round(result["speedup"], 3),
                    "build_kinds": [b.get("kind") for b in result.get("builds", [])],
                }
                rows.append(row)
                out.out(
                    f"{len(rows):>2}  {i:>6}  {path:<6}  {wall_s:>8.2f}  {result['wall_s']:>10.2f}  "
                    f"{result['speedup']:>7.2f}  {result['status']}",
                )
                if result["status"] != "ok":
                    fail(row, result)
                    return 1
                if path == "fast":
                    fast_sources.append(code)

        # Same texts again: their build keys match, so these verifies compile nothing. One per
        # source, because a single verify varies by about a second (timing, sandbox start).
        cached_rows: list[dict[str, Any]] = []
        for i, code in enumerate(fast_sources):
            t0 = time.monotonic()
            cached = verify_candidate(str(PROBLEM_PATH), code, ctx)
            wall_s = time.monotonic() - t0
            cached_rows.append(
                {
                    "source": i,
                    "path": "fast (cached)",
                    "wall_s": round(wall_s, 3),
                    "verifier_wall_s": round(cached["wall_s"], 3),
                    "status": cached["status"],
                }
            )
            out.out(
                f"{'':>2}  {i:>6}  {'fast*':<6}  {wall_s:>8.2f}  {cached['wall_s']:>10.2f}  "
                f"{cached['speedup']:>7.2f}  {cached['status']}",
            )
            if cached["status"] != "ok":
                fail(cached_rows[-1], cached)
                return 1
        out.out("(fast* = re-verify of the same source, build cached)")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)

    load_end = load_avg()
    median_s = {p: statistics.median(r["wall_s"] for r in rows if r["path"] == p) for p in paths}
    cached_s = statistics.median(r["wall_s"] for r in cached_rows)
    figures: dict[str, Any] = {
        "problem": str(PROBLEM_PATH),
        "sources_per_path": args.sources,
        "cpus": os.cpu_count(),
        "context": {
            "num_threads": ctx.num_threads,
            "compile_timeout_s": ctx.compile_timeout_s,
            "timed_calls": ctx.timed_calls,
            "correctness_trials": ctx.correctness_trials,
        },
        "load_avg_start": load_start,
        "load_avg_end": load_end,
        "rows": rows,
        "median_fast_s": round(median_s["fast"], 3),
        "cached_rows": cached_rows,
        "median_fast_cached_reverify_s": round(cached_s, 3),
        # What the first build of a fast source adds on top of the verifier's own cost.
        "fast_build_overhead_s": round(median_s["fast"] - cached_s, 3),
    }
    out.out(f"\nmedian fast:   {median_s['fast']:.2f} s  (n={args.sources})")
    if "inline" in median_s:
        ratio = median_s["inline"] / median_s["fast"]
        figures.update(median_inline_s=round(median_s["inline"], 3), inline_over_fast=round(ratio, 2))
        out.out(f"median inline: {median_s['inline']:.2f} s  (n={args.sources})")
        out.out(f"ratio inline/fast: {ratio:.1f}x")
    out.out(f"median fast re-verify, build cached (the verifier's compile-free cost): {cached_s:.2f} s")
    out.out(f"so a new fast build adds {median_s['fast'] - cached_s:+.2f} s to a verify")
    out.out(f"load average at end (1/5/15 min): {load_end}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        out.out(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
