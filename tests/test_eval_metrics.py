"""Evaluation metrics on known inputs, against values computed by hand."""

import math

import pytest

from pragma.eval import metrics
from pragma.eval.metrics import Outcome


def outcomes():
    # Four problems, one mode: speedups 2.0 and 0.5 and 4.0 solved, one unsolved.
    return [
        Outcome("a", "matmul", "pragma", True, 2.0, tokens=1000, cost_usd=0.10, iterations=3),
        Outcome("b", "matmul", "pragma", True, 0.5, tokens=3000, cost_usd=0.30, iterations=5),
        Outcome("c", "activation", "pragma", True, 4.0, tokens=2000, cost_usd=0.20, iterations=2),
        Outcome("d", "activation", "pragma", False, 0.0, tokens=6000, cost_usd=0.60, iterations=15),
    ]


def test_summary_matches_hand_computed_values():
    s = metrics.summarize(outcomes())
    assert s["problems"] == 4 and s["solved"] == 3
    assert s["success_rate"] == pytest.approx(0.75)
    # fast_p counts solved problems with speedup > p over ALL four problems.
    assert s["fast"] == {
        0.0: pytest.approx(0.75),
        1.0: pytest.approx(0.5),
        1.2: pytest.approx(0.5),
        2.0: pytest.approx(0.25),
    }  # 2.0 is not > 2.0
    solved = s["speedup_solved"]
    assert solved["mean"] == pytest.approx((2.0 + 0.5 + 4.0) / 3)  # 2.1667
    assert solved["geomean"] == pytest.approx(math.prod([2.0, 0.5, 4.0]) ** (1 / 3))  # 4^(1/3) = 1.5874
    assert solved["median"] == pytest.approx(2.0)
    everything = s["speedup_all"]  # the unsolved problem counts as 1.0x
    assert everything["mean"] == pytest.approx((2.0 + 0.5 + 4.0 + 1.0) / 4)  # 1.875
    assert everything["geomean"] == pytest.approx(4.0**0.25)  # (2*0.5*4*1)^(1/4) = 1.4142
    assert everything["median"] == pytest.approx((1.0 + 2.0) / 2)
    assert s["tokens"] == 12000 and s["tokens_per_solved"] == pytest.approx(4000)
    assert s["cost_per_solved_usd"] == pytest.approx(1.20 / 3)


def test_nothing_solved_gives_na_not_zero_division():
    s = metrics.summarize([Outcome("x", "others", "single-agent", False, 0.0, tokens=10)])
    assert s["success_rate"] == 0.0 and s["fast"][1.0] == 0.0
    assert s["speedup_solved"] == {"mean": None, "geomean": None, "median": None}
    assert s["speedup_all"]["geomean"] == pytest.approx(1.0)
    assert s["tokens_per_solved"] is None and s["cost_per_solved_usd"] is None
    assert metrics.summarize([])["success_rate"] == 0.0


def test_per_category_split():
    per = metrics.by_mode_and_category(outcomes())["pragma"]
    assert per["matmul"]["success_rate"] == 1.0 and per["matmul"]["speedup_solved"]["mean"] == pytest.approx(1.25)
    assert per["activation"]["success_rate"] == 0.5 and per["activation"]["fast"][2.0] == pytest.approx(0.5)
    assert per["activation"]["speedup_all"]["geomean"] == pytest.approx(2.0)  # sqrt(4 * 1)


def test_best_so_far_follows_the_verifiers_acceptance():
    rows = [
        {"problem": "p", "iteration": 1, "status": "compile_error", "speedup": 0.0, "accepted": None},
        {"problem": "p", "iteration": 2, "status": "ok", "speedup": 1.5, "accepted": 1},
        # faster on paper but not accepted (CI overlaps the best): the best stays 1.5
        {"problem": "p", "iteration": 3, "status": "ok", "speedup": 1.6, "accepted": 0},
        {"problem": "p", "iteration": 4, "status": "ok", "speedup": 2.5, "accepted": 1},
        # a verifier without decisions: the fastest correct attempt
        {"problem": "q", "iteration": 1, "status": "ok", "speedup": 3.0, "accepted": None},
        {"problem": "q", "iteration": 2, "status": "ok", "speedup": 2.0, "accepted": None},
    ]
    curves = metrics.best_so_far(rows, max_iterations=5)
    assert curves["p"] == [0.0, 1.5, 1.5, 2.5, 2.5]  # stopped after 4: the last value carries on
    assert curves["q"] == [3.0, 3.0, 3.0, 3.0, 3.0]
    summary = metrics.curve_summary(curves, n_problems=3)  # a third problem never got an attempt
    assert summary["solved_fraction"] == pytest.approx([1 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3])
    assert summary["geomean_speedup_all"][0] == pytest.approx(3.0 ** (1 / 3))  # (1 * 3 * 1)^(1/3)
    assert summary["geomean_speedup_all"][4] == pytest.approx((2.5 * 3.0) ** (1 / 3))


def _attempt(problem, iteration, status="ok", accepted=0, extra=0, changed=0):
    return {
        "problem": problem,
        "iteration": iteration,
        "status": status,
        "accepted": accepted,
        "extra_batches": extra,
        "decision_changed": changed,
    }


def test_sequential_summary_counts_only_attempts_timed_against_a_best():
    rows = [
        # p: first accepted (no best yet: not a head-to-head), then a straddle decided for,
        # a straddle decided against, a straddle left undecided, one decided by the first batch.
        _attempt("p", 1, accepted=1),
        _attempt("p", 2, accepted=1, extra=2, changed=1),
        _attempt("p", 3, accepted=0, extra=1, changed=1),
        _attempt("p", 4, accepted=0, extra=3, changed=0),
        _attempt("p", 5, accepted=0),
        # q: a failed attempt before any best, then its first accepted: no head-to-head at all;
        # a later failure is not timed.
        _attempt("q", 1, status="mismatch"),
        _attempt("q", 2, accepted=1, extra=0),
        _attempt("q", 3, status="compile_error"),
        # r: an old database's rows (no sequential columns) count as not straddled.
        {"problem": "r", "iteration": 1, "status": "ok", "accepted": 1},
        {"problem": "r", "iteration": 2, "status": "ok", "accepted": 0},
    ]
    s = metrics.sequential_summary(rows)
    assert s == {"head_to_head": 5, "straddled": 3, "decided": 2, "accepted": 1, "rejected": 1, "undecided": 1}


def test_a_results_database_from_before_the_sequential_columns_gains_them(tmp_path):
    import sqlite3

    from pragma.eval.db import ResultsDB

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE eval_attempts (run_id TEXT, problem TEXT, mode TEXT, iteration INTEGER, status TEXT, "
        "PRIMARY KEY (run_id, problem, mode, iteration))"
    )
    conn.execute("INSERT INTO eval_attempts VALUES ('r', 'p', 'pragma', 1, 'ok')")
    conn.commit()
    conn.close()
    db = ResultsDB(str(path))
    db.upsert(
        "eval_attempts",
        {"run_id": "r", "problem": "p", "mode": "pragma", "iteration": 2, "status": "ok", "extra_batches": 2},
    )
    rows = db.attempts("r")
    assert [r["extra_batches"] for r in rows] == [None, 2]
    ResultsDB(str(path))  # a second open finds every column present and changes nothing
