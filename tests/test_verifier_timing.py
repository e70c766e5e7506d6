"""Timing statistics, plausibility, correctness helpers and the acceptance of a new best.

Unit tests use synthetic numbers or small tensors; the integration tests compare kernels whose
speed differs by about 10x (relu_fast vs relu_slow at -O0), so no assertion depends on noise.
"""

import random

import pytest
import torch
from conftest import CANDIDATES, EXAMPLES

from pragma.graph.context import resolve_context
from pragma.graph.state import keep_best
from pragma.tools.judging import compare, judge, physical, stats
from pragma.tools.verify import _accept, empty_result, verify_candidate

pytestmark = [pytest.mark.integration, pytest.mark.timing]  # starts sandboxes/processes (tests/conftest.py)

RELU = str(EXAMPLES / "relu.py")


def noisy(mean_ms: float, n: int = 100, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [mean_ms * (1 + 0.05 * rng.random()) + (3 * mean_ms if rng.random() < 0.03 else 0) for _ in range(n)]


def test_bootstrap_ci_brackets_the_true_ratio_and_excludes_one_only_when_warranted():
    low, high = stats.ratio_ci(noisy(2.0, seed=1), noisy(1.0, seed=2))
    assert 1.9 < low < 2.0 < high < 2.1
    low, high = stats.ratio_ci(noisy(1.0, seed=3), noisy(1.0, seed=4))
    assert low < 1.0 < high
    assert stats.ratio_ci([], []) == (0.0, 0.0)


def test_summary_reports_medians_minimums_and_both_speedups():
    summary = stats.summarize({"reference": [4.0, 4.2, 4.1], "candidate": [2.0, 2.1, 1.9], "best": [3.0, 3.1, 2.9]})
    # The median of per-round ratios (4/2, 4.2/2.1, 4.1/1.9), not the ratio of the medians.
    assert summary["speedup"] == pytest.approx(2.0)
    assert summary["runtime_ms"] == 2.0 and summary["ref_runtime_ms"] == 4.1
    assert summary["runtime_min_ms"] == 1.9 and summary["ref_runtime_min_ms"] == 4.0
    assert summary["speedup_of_minimums"] == pytest.approx(4.0 / 1.9)
    assert summary["speedup_vs_best"] == pytest.approx(3.0 / 2.0, rel=0.04)
    assert summary["speedup_vs_best_ci"][0] > 1.0
    assert stats.spread_pct([0.98, 1.0, 1.02]) == pytest.approx(2.0)


def ok_result(**over):
    res = empty_result("ok", "fine")
    res.update(
        holdout_ok=True,
        speedup=2.0,
        speedup_ci=[1.8, 2.2],
        samples_ms={"reference": [2.0], "candidate": [1.0], "best": [1.5]},
    )
    res.update(over)
    return res


@pytest.mark.parametrize(
    "result, has_best, accepted",
    [
        (ok_result(), False, True),  # first correct candidate
        (ok_result(speedup_vs_best_ci=[1.02, 1.2]), True, True),
        (ok_result(speedup_vs_best_ci=[0.97, 1.2]), True, False),  # noise must not crown a kernel
        (ok_result(speedup_vs_best_ci=[0.5, 0.8]), True, False),
        (ok_result(is_suspicious=True), False, False),
        (ok_result(holdout_ok=False), False, False),
        (empty_result("mismatch", "wrong"), False, False),
        (ok_result(samples_ms={"reference": [2.0], "candidate": [1.0]}, speedup_ci=[1.8, 2.2]), True, True),
    ],
)
def test_acceptance_rule(result, has_best, accepted):
    decision, reason = _accept(result, has_best, best_speedup=1.5)
    assert decision is accepted, reason
    assert reason.startswith("accepted" if accepted else "not accepted")


def test_keep_best_obeys_the_verifiers_decision():
    best = keep_best({}, {"iteration": 3, "speedup": 1.5, "is_new_best": True})
    # Accepted head-to-head although its speedup over the reference reads lower (older measurement).
    assert keep_best(best, {"iteration": 4, "speedup": 1.4, "is_new_best": True})["iteration"] == 4
    assert keep_best(best, {"iteration": 5, "speedup": 9.0, "is_new_best": False}) == best
    merged = keep_best(best, {"iteration": 3, "profile": {"bottleneck": "memory-bound"}})
    assert merged["profile"]["bottleneck"] == "memory-bound" and merged["speedup"] == 1.5


def test_plausibility_flags_times_below_the_memory_traffic_bound(isolated_data_dir):
    traffic = 64 * 2**20
    real = physical.plausibility(traffic, runtime_ms=5.0, ref_runtime_min_ms=6.0, num_threads=1)
    assert real["verdict"] == "pass" and not real["is_suspicious"] and real["bandwidth_bytes_per_s"] > 0
    absurd = physical.plausibility(traffic, runtime_ms=1e-4, ref_runtime_min_ms=6.0, num_threads=1)
    assert absurd["verdict"] == "warn" and absurd["is_suspicious"]
    assert absurd["min_time_bound_ms"] > 1e-4
    # The reference is physical by definition: the bound never calls its own speed impossible,
    # and the largest bandwidth seen is remembered for later verifications.
    fast_ref = physical.plausibility(traffic, runtime_ms=0.5, ref_runtime_min_ms=0.5, num_threads=1)
    assert not fast_ref["is_suspicious"]
    assert physical.copy_bandwidth_bytes_per_s(traffic) >= traffic / 0.5e-3
    assert physical.plausibility(0, 1.0, 1.0, 1)["verdict"] == "skip"


def test_compare_handles_dtypes_nans_and_reports_differences():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare.compare(ref, ref.clone(), 1e-4, 1e-4)["ok"]
    bad = compare.compare(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, float("nan"), 3.0]), 1e-4, 1e-4)
    assert not bad["ok"] and "NaN/Inf where the reference is finite" in bad["message"]
    off = compare.compare(torch.ones(4), torch.ones(4) + 1e-3, 1e-4, 1e-4)
    assert not off["ok"] and off["max_abs_diff"] == pytest.approx(1e-3, rel=1e-3)
    assert not compare.compare(torch.ones(4), torch.ones(4, dtype=torch.float64), 1e-4, 1e-4)["ok"]
    assert not compare.compare(torch.ones(4), torch.ones(2, 2), 1e-4, 1e-4)["ok"]
    # fp16 outputs get the looser half-precision tolerance, fp32 keeps the run's.
    half = torch.ones(4, dtype=torch.float16)
    assert compare.compare(half, half + 0.004, 1e-4, 1e-4)["ok"]
    assert compare.tolerance_for(torch.float32, 1e-4, 1e-4) == (1e-4, 1e-4)


def test_degenerate_tolerance_detects_outputs_a_constant_would_match():
    assert compare.degenerate_tolerance(torch.rand(1000) * 1e-5, 1e-4, 1e-4).startswith("output 0: an all-zeros")
    assert "constant" in compare.degenerate_tolerance(1.0 + torch.rand(1000) * 1e-5, 1e-4, 1e-4)
    assert compare.degenerate_tolerance(torch.randn(1000), 1e-4, 1e-4) is None


@pytest.mark.parametrize(
    "candidate, best, accepted",
    [
        ("relu_fast.py", "relu_slow.py", True),
        ("relu_slow.py", "relu_fast.py", False),
    ],
)
def test_head_to_head_against_the_best(isolated_data_dir, candidate, best, accepted):
    ctx = resolve_context(timed_calls=15, warmup_calls=2, warmup_s=0.2)
    result = verify_candidate(
        RELU, (CANDIDATES / candidate).read_text(), ctx, best_code=(CANDIDATES / best).read_text(), best_speedup=1.0
    )
    assert result["status"] == "ok", result["message"]
    assert set(result["samples_ms"]) == {"reference", "candidate", "best"}
    assert all(len(v) == 15 for v in result["samples_ms"].values())
    low, high = result["speedup_vs_best_ci"]
    assert (low > 1.0) if accepted else (high < 1.0), (low, high)
    assert result["is_new_best"] is accepted, result["acceptance"]
    # Warm-up ran by count, then until the calls settled (10 rounds at least) or 0.2 s passed.
    assert result["warmup_rounds"] >= 2 and (result["warmup_rounds"] >= 10 or result["warmup_elapsed_s"] >= 0.2)
    # Against a best every batch runs whole: no early end on the CI vs the reference.
    assert result["timed_rounds_stop"] == "all 15 sampled rounds"
    assert {"static_checks", "startup", "build", "build_best", "check", "time", "recheck"} <= set(result["phases_s"])


def test_warm_up_ends_when_the_call_times_settle():
    steady = [10.0] * 10
    assert judge.settled(steady)
    assert judge.settled([30.0, 20.0, 12.0] + [10.0] * 10)  # first calls slow, the last two windows agree
    assert not judge.settled([10.0] * 9)  # two windows of 5 at least
    assert not judge.settled([10.0 * 1.01**i for i in range(20)])  # drifting 1% per call: 5% per window
    assert judge.settled([10.0, 10.2, 9.9, 10.1, 10.0, 10.25, 10.1, 10.3, 10.2, 9.95])  # noise within 3%


@pytest.mark.parametrize(
    "ci_pct, rounds, why",
    [
        (50.0, 30, "after 30 sampled rounds: the speedup's 95% CI"),  # any CI is narrow enough at the first look
        (1e-9, 60, "all 60 sampled rounds"),  # never narrow enough: the rule looks at the CI's width
        (0.0, 60, "all 60 sampled rounds"),  # off
    ],
)
def test_timed_rounds_end_once_the_speedup_is_precise_enough(isolated_data_dir, ci_pct, rounds, why):
    ctx = resolve_context(timed_calls=60, warmup_calls=2, warmup_s=5.0, timing_ci_pct=ci_pct)
    result = verify_candidate(RELU, (CANDIDATES / "relu_fast.py").read_text(), ctx)
    assert result["status"] == "ok", result["message"]
    assert all(len(v) == rounds for v in result["samples_ms"].values())
    assert result["timed_rounds_stop"].startswith(why), result["timed_rounds_stop"]
    # Audits and recorded rounds were drawn so a short batch keeps a whole batch's count (17, the
    # last round among them: recorded rounds are extra, not samples), issue 33's <= 1% escape for a
    # kernel wrong on a quarter of its timed calls.
    audited, recorded = result["audited_calls"], result["recorded_calls"]
    assert len(set(audited)) >= 17 and recorded
    assert result["audit_escape_at_quarter"] <= 0.01
    if ci_pct > 0:  # the batch may end early: all but one drawn among the first 30 rounds
        assert len([i for i in audited if i < 30]) >= 16
    assert max(audited) == rounds + len(recorded) - 1
    # A steady kernel settles long before the 5 s cap on the warm-up.
    assert 10 <= result["warmup_rounds"] and result["warmup_elapsed_s"] < 5.0


def test_acceptance_needs_the_margin_over_the_best():
    """Identical kernels in two runner processes read up to ~5% apart: a CI just above 1.0 is not a gain."""
    near = ok_result(speedup_vs_best_ci=[1.02, 1.06])
    assert _accept(near, True, best_speedup=1.5)[0]
    decision, reason = _accept(near, True, best_speedup=1.5, margin=0.08)
    assert not decision and "1.080" in reason
    assert _accept(ok_result(speedup_vs_best_ci=[1.2, 1.4]), True, best_speedup=1.5, margin=0.08)[0]


def test_a_second_pair_of_runners_must_confirm_an_acceptance():
    """Judge.confirm: a would-be acceptance is timed again in a second candidate/best pair; a
    per-process bias clears the bar in one pair, not in two."""
    first = [1.10, 1.20]
    confirmed = ok_result(
        speedup_vs_best_ci=first, confirmation={"speedup_vs_best_ci": [1.09, 1.15], "confirmed": True}
    )
    decision, reason = _accept(confirmed, True, best_speedup=1.5, margin=0.08)
    assert decision and "confirmed by a second pair of runners (CI [1.090, 1.150])" in reason
    refuted = ok_result(speedup_vs_best_ci=first, confirmation={"speedup_vs_best_ci": [0.97, 1.03], "confirmed": False})
    decision, reason = _accept(refuted, True, best_speedup=1.5, margin=0.08)
    assert not decision and "not in a second pair, CI [0.970, 1.030]" in reason
    # No confirmation ran (a clear win, or no second pair): the first pair decides alone.
    assert _accept(ok_result(speedup_vs_best_ci=first, confirmation={}), True, best_speedup=1.5, margin=0.08)[0]


def test_a_mismatch_shows_the_first_wrong_elements_with_the_inputs_there():
    # A ReLU written for an ELU: the message names where, what was expected, what came back, and the
    # input there (an input of another shape is left out).
    x = torch.tensor([[0.5, -1.0, 2.0], [-0.25, 1.0, -3.0]])
    ref, relu = torch.nn.functional.elu(x), torch.relu(x)
    got = compare.compare(ref, relu, 1e-4, 1e-4, inputs=[x, torch.ones(7)])
    assert not got["ok"] and "3 of 6 elements differ" in got["message"]
    assert (
        "first: at [0, 1]: expected -0.6321, got 0 (input 0 there: -1); at [1, 0]: expected -0.2212" in got["message"]
    )
    assert "input 1" not in got["message"]
    assert "first:" not in compare.compare(ref, relu, 1e-4, 1e-4)["message"]  # without inputs, as before
