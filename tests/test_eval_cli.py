"""``pragma eval``: bad input gives one line on stderr and exit code 2; reports and listings of
runs recorded in the results database (written here directly: no graph runs needed)."""

import json
import sys
import time

import pytest
from conftest import EXAMPLES, ROOT

from pragma.eval import store
from pragma.eval.db import ResultsDB
from pragma.graph.cli import main


def pragma(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["pragma", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "run"], "give a SUITE_DIR, or --resume RUN"),
        (["eval", "run", "/no/such/suite", "--coder-model", "openai:m"], "suite directory not found"),
        (["eval", "run", str(EXAMPLES), "--mode", "fancy", "--coder-model", "openai:m"], "unknown mode(s) fancy"),
        (
            ["eval", "run", str(EXAMPLES), "--overrides", "/no/such.json", "--coder-model", "openai:m"],
            "override file not found",
        ),
        (["eval", "run", str(EXAMPLES), "--workers", "0"], "--workers must be at least 1"),
        (["eval", "run", str(EXAMPLES), "--max-iterations", "0", "--coder-model", "openai:m"], "at least 1"),
        (["eval", "run", str(EXAMPLES), "--coder-model", "nonsense:m"], "unknown provider"),
        (["eval", "run", "--resume", "nope"], "no evaluation run 'nope'"),
        (["eval", "run", str(EXAMPLES), "--resume", "nope"], "--resume RUN continues a run"),
        (["eval", "report", "nope"], "no evaluation run 'nope'"),
        # Usage errors of the command line itself (typer raises its vendored click's exceptions).
        (["eval", "run", str(EXAMPLES), "--mode", "pragma", "no-profile"], "unexpected extra argument"),
        (["eval", "run", str(EXAMPLES), "--no-such-flag"], "No such option"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, args, message):
    monkeypatch.setenv("PRAGMA_LLM_API_KEY", "unused")  # model specs are checked, never called
    code, _, err = pragma(monkeypatch, capsys, *args)
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err


def fake_run(run_id: str, with_baseline: bool) -> None:
    """A finished two-problem run as the harness would have recorded it."""
    db = ResultsDB(store.default_results_url())
    now = time.time()
    db.upsert(
        "eval_runs",
        {
            "run_id": run_id,
            "suite_dir": str(ROOT / "eval" / "suites" / "examples"),
            "overrides_path": "",
            "patterns_json": "[]",
            "modes_json": json.dumps(["pragma"]),
            "context_json": json.dumps({"max_iterations": 3, "num_threads": 1}),
            "settings_json": json.dumps({"workers": 2, "problem_budget_s": 600}),
            "machine_json": json.dumps({"cpu": "test cpu", "cores": 2}),
            "status": "finished",
            "created_at": now,
            "updated_at": now,
            "wall_s": 12.0,
        },
    )
    for problem, category, solved, speedup in (("relu", "activation", 1, 2.5), ("matmul", "matmul", 0, 0.0)):
        db.upsert(
            "eval_problems",
            {
                "run_id": run_id,
                "problem": problem,
                "mode": "pragma",
                "category": category,
                "status": "finished",
                "solved": solved,
                "best_speedup": speedup,
                "best_iteration": 2 if solved else 0,
                "iterations": 3,
                "input_tokens": 900.0,
                "output_tokens": 100.0,
                "cost_usd": 0.0,
                "ref_ms": 10.0,
                "message": "",
            },
        )
        for i in (1, 2, 3):
            ok = solved and i >= 2
            db.upsert(
                "eval_attempts",
                {
                    "run_id": run_id,
                    "problem": problem,
                    "mode": "pragma",
                    "iteration": i,
                    "status": "ok" if ok else "mismatch",
                    "accepted": int(ok and i == 2),
                    "speedup": speedup if ok else 0.0,
                    "recorded_at": now,
                },
            )
        if with_baseline:
            db.upsert(
                "eval_problems",
                {
                    "run_id": run_id,
                    "problem": problem,
                    "mode": "torch.compile",
                    "category": category,
                    "status": "finished",
                    "solved": int(problem == "relu"),
                    "best_speedup": 1.1 if problem == "relu" else 0.0,
                    "iterations": 1,
                    "message": "" if problem == "relu" else "unavailable: torch.compile failed: X",
                },
            )


def test_report_and_runs_listing(monkeypatch, capsys, tmp_path):
    fake_run("r1", with_baseline=True)
    code, out, err = pragma(monkeypatch, capsys, "eval", "report", "r1", "--out", str(tmp_path / "rep"))
    assert code == 0, err
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| pragma | 50.0% | 2.50x | 1.58x | 50.0% |" in md  # geomean(2.5, 1.0) = 1.58
    assert "| torch.compile | 50.0% | 1.10x |" in md and "unavailable: torch.compile failed: X" in md
    assert "unsolved: mismatch, mismatch, mismatch" in md
    code, out, _ = pragma(monkeypatch, capsys, "eval", "runs")
    assert code == 0 and "r1" in out and "4 finished" in out  # 2 problems x (pragma + baseline)


ADVERSARIAL_PROBLEMS = ROOT / "tests" / "data" / "adversarial" / "problems"


def test_eval_check_prints_each_problem_and_fails_only_on_an_undecidable_or_broken_one(monkeypatch, capsys, tmp_path):
    code, out, err = pragma(
        monkeypatch, capsys, "eval", "check", str(ADVERSARIAL_PROBLEMS), "--json", str(tmp_path / "check.json")
    )
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert code == 1, out + err
    assert "not decidable: one fixed output passes" in lines["tiny_softmax"]
    # A scalar that is 1.0 on every torch.rand draw: decidable, and only through the stress variants.
    assert lines["fraction_nonnegative"].endswith("decidable with the stress variants only")
    assert lines["relu_rand"].endswith("decidable")
    assert out.strip().splitlines()[-1] == (
        "12 problems: 11 decidable (2 only with the stress variants), 1 not decidable, 0 failed to load"
    )
    figures = json.loads((tmp_path / "check.json").read_text())
    assert figures["symmetric_matmul"]["structures"] == ["symmetric", "symmetric"]
    assert figures["symmetric_matmul"]["stress_used"] == [
        "negated",
        "scaled x1e-03",
        "scaled x1e+03",
        "mixed signs",
        "wide range",
    ]
    # Probability rows are never negated or scaled; other draws of the same structure stress them.
    assert figures["soft_target_cross_entropy"]["structures"] == ["plain", "probability rows"]
    assert {"sharper rows", "flatter rows", "one-hot rows"} <= set(figures["soft_target_cross_entropy"]["stress_used"])

    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("relu_rand", "mse_rand"):
        (suite / f"{name}.py").write_text((ADVERSARIAL_PROBLEMS / f"{name}.py").read_text())
    code, out, _ = pragma(monkeypatch, capsys, "eval", "check", str(suite))
    assert code == 0 and out.strip().splitlines()[-1].startswith("2 problems: 2 decidable"), out
    (suite / "broken.py").write_text(
        (ADVERSARIAL_PROBLEMS / "relu_rand.py")
        .read_text()
        .replace("torch.rand(batch_size, dim)", "torch.rand(batch_size, dim) @ 3")
    )
    code, out, _ = pragma(monkeypatch, capsys, "eval", "check", str(suite))
    assert code == 1 and "cannot load: TypeError" in out and "1 failed to load" in out, out
    code, _, err = pragma(monkeypatch, capsys, "eval", "check", str(tmp_path / "nowhere"))
    assert code == 2 and "suite directory not found" in err


def test_an_eval_run_keeps_its_jobs_from_sharing_the_kernel_memory(monkeypatch, capsys):
    # Compared modes and reruns must not hand each other kernels through the memory (the profiler
    # of one job adds its best, the Coder of another shows it): unshared unless asked for.
    from pragma.eval import harness

    monkeypatch.setenv("PRAGMA_LLM_API_KEY", "unused")
    monkeypatch.setattr(harness, "execute", lambda *a, **k: {})  # the run is registered, not executed
    db = ResultsDB(store.default_results_url())
    for run_id, extra in (("mem-default", []), ("mem-shared", ["--set", "kernel_memory_shared=true"])):
        args = ["eval", "run", str(EXAMPLES), "--coder-model", "openai:m", "--problems", "relu", "--run-id", run_id]
        code, out, err = pragma(monkeypatch, capsys, *args, *extra)
        assert code == 0, err
        shared = json.loads(db.run(run_id)["context_json"])["kernel_memory_shared"]
        assert shared is (run_id == "mem-shared")
