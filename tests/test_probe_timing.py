"""The reference time printed at a run's start (the problem probe, tools/inside/worker.py) is measured the
way the verifier measures the reference, so the two agree (issue 33, "figures that hold")."""

import time
from pathlib import Path

import pytest

from pragma.graph.context import resolve_context
from pragma.tools import problem
from pragma.tools.inside.worker import steady_call_ms
from pragma.tools.verify import verify_candidate

DATA = Path(__file__).parent / "data"


def test_steady_call_ms_ignores_the_slow_first_calls():
    """A call slow for its first 6 calls (a fresh heap growing) and fast after: the median is the
    fast time. The probe's old rule (median of calls 4-10 within 0.6 s) read the slow time."""
    calls = []

    def call():
        calls.append(None)
        time.sleep(0.03 if len(calls) <= 6 else 0.002)

    timing = steady_call_ms(call, warmup_calls=5, warmup_s=0.5)
    assert timing["median_ms"] < 6.0, timing
    assert timing["warmup_calls"] >= 10  # two windows of 5 must agree before timing starts
    assert timing["samples"] >= 10


def test_steady_call_ms_keeps_a_slow_call_within_its_warmup_cap():
    """A 60 ms call stops warming up after ``warmup_calls`` once ``warmup_s`` passed, and is timed
    at least 10 times: the probe costs ~1 s for such a reference, not minutes."""
    started = time.perf_counter()
    timing = steady_call_ms(lambda: time.sleep(0.06), warmup_calls=3, warmup_s=0.1)
    assert timing["warmup_calls"] == 3
    assert timing["samples"] == 10
    assert 55 < timing["median_ms"] < 120
    assert time.perf_counter() - started < 2.0


@pytest.mark.integration
@pytest.mark.timing
@pytest.mark.parametrize("name", ["relu_slow_first_calls", "relu_kernelbench_64mib"])
def test_start_of_run_reference_time_agrees_with_the_verifiers(monkeypatch, name):
    """The start-of-run figure lies within a factor 2 of the spread of the verifier's own reference
    samples (its fastest, less the judge's null round trip, / 2 up to its 90th percentile x 2).

    relu_slow_first_calls: its first 12 calls sleep 40 ms; the probe before this change timed calls
    5-11 and read 44 ms where the verifier's samples ran 2.3-8.6 ms (load 6-7): it fails on that code. relu_kernelbench_64mib, the issue's case: the old probe read 185 ms per call (load 0.7),
    13-389 ms (load 6-8) where the verifier timed it at 5.6 ms and 6-25 ms.
    Why a factor 2 and the samples' spread, not a ratio of two medians: the verifier's timed window
    also holds what only it pays (the judge's round trip, its read of 256 output elements before the
    clock stops, inputs rewritten between rounds by another process): at 16 MB the probe read
    1.32-1.38 ms and the verifier's fastest sample 2.27-2.35 ms (load 6-7); and at load 4-8 (other
    agents on the 2 cores) the two, measured seconds apart, move independently."""
    for key, value in {"PRAGMA_WARMUP_CALLS": "5", "PRAGMA_WARMUP_S": "0.5", "PRAGMA_TIMED_CALLS": "30"}.items():
        monkeypatch.setenv(key, value)
    ctx = resolve_context()
    probed = problem.load_problem(
        DATA / "problems" / f"{name}.py",
        num_threads=ctx.num_threads,
        seed=ctx.seed,
        warmup_calls=ctx.warmup_calls,
        warmup_s=ctx.warmup_s,
    )
    code = (DATA / "candidates" / "relu_fast.py").read_text()
    verified = verify_candidate(probed["path"], code, ctx)
    assert verified["status"] == "ok", verified["message"]
    samples = sorted(verified["samples_ms"]["reference"])
    # The verifier's samples include its judge's round trip to the runner; the probe's do not.
    low = (samples[0] - verified["null_round_trip_ms"]) / 2
    high = samples[int(0.9 * (len(samples) - 1))] * 2
    start_ms = probed["ref_call_ms"]
    assert probed["ref_call_timing"]["samples"] >= 10
    assert low <= start_ms <= high, (
        f"start of run {start_ms:.3f} ms per call; verifier's reference samples {samples[0]:.3f}-"
        f"{samples[-1]:.3f} ms, median {verified['ref_runtime_ms']:.3f}: {probed['ref_call_timing']}"
    )


def test_progress_says_what_the_start_of_run_figure_is():
    from rich.console import Console

    from pragma.graph.runner import _progress

    console = Console(record=True, width=200)
    problem = {"name": "relu", "ref_call_ms": 2.5, "ref_call_timing": {"samples": 34}}
    _progress(console, "setup", {"problem": problem, "hardware": "CPU"}, {})
    assert "reference 2.50 ms per call (median of 34 calls once warm)" in console.export_text()
