"""Issue 12 part 3: scores that cannot flatter. Every problem x mode is counted; anything but a
finished, solved job is unsolved at 1.0x; a budget-killed job keeps only the verifier's accepted
best; a report with pending or running jobs says so on its first line."""

from __future__ import annotations

import pytest

from pragma.eval import metrics, report
from pragma.eval.supervise import budget_best


def row(
    problem: str, status: str, solved: int = 0, speedup: float = 0.0, mode: str = "pragma", category: str = "activation"
) -> dict:
    return {
        "problem": problem,
        "mode": mode,
        "category": category,
        "status": status,
        "solved": solved,
        "best_speedup": speedup,
        "best_iteration": 2 if solved else 0,
        "input_tokens": 10.0,
        "output_tokens": 5.0,
        "cost_usd": 0.0,
        "iterations": 3,
        "message": "",
        "ref_ms": 1.0,
    }


def summary(rows: list[dict], modes: list[str] | None = None) -> dict:
    outcomes = report.outcomes_of(rows, modes)
    return {m: metrics.summarize(g) for m, g in metrics.by_key(outcomes, "mode").items()}


def test_two_solved_and_two_crashed_read_half_not_all():
    rows = [row("a", "finished", 1, 2.0), row("b", "finished", 1, 2.0), row("c", "error"), row("d", "error")]
    s = summary(rows)["pragma"]
    assert s["problems"] == 4 and s["solved"] == 2
    assert s["success_rate"] == pytest.approx(0.5) and s["fast"][1.0] == pytest.approx(0.5)
    assert s["speedup_all"]["geomean"] == pytest.approx(2.0**0.5)  # geomean(2, 2, 1, 1)
    assert s["speedup_solved"]["mean"] == pytest.approx(2.0)


@pytest.mark.parametrize("status", ["error", "budget_exceeded", "pending", "running", "interrupted", "locked"])
def test_anything_but_finished_and_solved_is_unsolved_at_one(status):
    # Even with a recorded accepted best (a budget-killed job keeps one), the job is unsolved.
    rows = [row("a", "finished", 1, 3.0), row("b", status, 1, 5.0)]
    s = summary(rows)["pragma"]
    assert s["solved"] == 1 and s["success_rate"] == pytest.approx(0.5)
    assert s["speedup_all"]["mean"] == pytest.approx((3.0 + 1.0) / 2)
    assert s["fast"][2.0] == pytest.approx(0.5)


def test_every_problem_and_mode_is_counted_even_without_a_row():
    rows = [
        row("a", "finished", 1, 2.0),
        row("a", "finished", 0, mode="single-agent"),
        row("b", "finished", 1, 4.0, category="matmul"),
    ]
    outcomes = report.outcomes_of(rows, ["pragma", "single-agent"])
    assert {(o.problem, o.mode) for o in outcomes} == {(p, m) for p in "ab" for m in ("pragma", "single-agent")}
    s = summary(rows, ["pragma", "single-agent"])
    assert s["single-agent"]["problems"] == 2 and s["single-agent"]["solved"] == 0
    per = metrics.by_mode_and_category(outcomes)
    assert per["single-agent"]["matmul"]["problems"] == 1  # b's missing row is in the category table too
    _, cells = report.table_problems(rows, ["pragma", "single-agent"], [])
    b = next(r for r in cells if r[0] == "b")
    assert b[-1] == "missing: counted unsolved"


def test_budget_killed_job_keeps_the_accepted_best_not_the_fastest_ok():
    # Attempt 3 measured faster (1.9x) but the verifier did not accept it; attempt 2 is the best.
    state = {"iteration": 3, "best": {"iteration": 2, "speedup": 1.2, "speedup_ci": [1.1, 1.3]}}
    attempts = [
        {"iteration": 1, "status": "mismatch", "speedup": 0.0, "accepted": 0, "ci_low": None, "ci_high": None},
        {"iteration": 2, "status": "ok", "speedup": 1.2, "accepted": 1, "ci_low": 1.12, "ci_high": 1.31},
        {"iteration": 3, "status": "ok", "speedup": 1.9, "accepted": 0, "ci_low": 1.0, "ci_high": 2.5},
    ]
    got = budget_best(state, attempts)
    assert got["best_speedup"] == 1.2 and got["best_iteration"] == 2 and got["solved"] == 1
    assert (got["best_ci_low"], got["best_ci_high"]) == (1.12, 1.31) and got["iterations"] == 3


def test_budget_killed_job_with_only_unaccepted_attempts_has_no_best():
    attempts = [{"iteration": 1, "status": "ok", "speedup": 1.5, "accepted": 0, "ci_low": 1.0, "ci_high": 2.0}]
    got = budget_best({"iteration": 1}, attempts)
    assert got["solved"] == 0 and got["best_speedup"] == 0.0 and got["best_ci_low"] is None


def test_partial_run_is_marked_on_the_first_line():
    rows = [row("a", "finished", 1, 2.0), row("b", "pending"), row("c", "running")]
    note = report.partial_note(rows)
    assert note.startswith("PARTIAL: 2 of 3 jobs pending or running")
    assert report.partial_note([row("a", "finished", 1, 2.0), row("b", "error")]) == ""
    data = {
        "run": {"run_id": "r", "suite_dir": "s", "overrides_path": "", "wall_s": 1.0},
        "problems": rows,
        "modes": ["pragma"],
        "all_modes": ["pragma"],
        "attempts": [],
        "context": {},
        "machine": {},
        "settings": {"workers": 1, "problem_budget_s": 10.0},
        "n_problems": 3,
        "status_counts": {},
        "summaries": summary(rows),
        "per_category": {},
        "outcomes": report.outcomes_of(rows),
        "sequential": {
            "pragma": {"head_to_head": 4, "straddled": 2, "decided": 1, "accepted": 1, "rejected": 0, "undecided": 1}
        },
    }
    text = report.render_markdown(data)
    assert (
        "pragma: 4 correct attempt(s) timed against the best; the first batch left 2 undecided (CI straddling "
        "the bar); extra batches decided 1 (1 accepted, 0 rejected), 1 still straddled and were not accepted"
    ) in text
    first = text.splitlines()[0]
    assert first.startswith("# Evaluation run `r`") and "PARTIAL: 2 of 3 jobs pending or running" in first
    assert "counts as unsolved, at 1.0x" in " ".join(report.CONVENTIONS)


def test_budget_killed_cell_shows_the_kept_best_and_says_unsolved():
    rows = [row("a", "budget_exceeded", 1, 1.4)]
    _, cells = report.table_problems(rows, ["pragma"], [])
    assert cells[0][-1] == "budget_exceeded: kept accepted best 1.40x @2, counted unsolved"


@pytest.mark.integration
def test_a_fresh_interpreters_spec_file_is_removed_by_the_child_or_when_reaped(tmp_path):
    # Each job started as a new interpreter gets its JobSpec in a temp file; they used to pile up
    # in /tmp (400 after a day of evaluations).
    import subprocess
    import sys

    from pragma.eval.job import JobSpec, _read_spec_file
    from pragma.eval.supervise import Running

    spec = JobSpec(
        run_id="r", problem={"name": "p"}, mode="pragma", context={}, results_url="", checkpoint_url="", out_dir=""
    )
    path = tmp_path / "pragma-job-x.json"
    path.write_text(spec.to_json())
    assert _read_spec_file(path) == spec and not path.exists()
    path.write_text(spec.to_json())  # a child that died before reading it
    running = Running(spec, 0.0, process=subprocess.Popen([sys.executable, "-c", "pass"]), spec_file=str(path))
    running.reap()
    assert not path.exists()
