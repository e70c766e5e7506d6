"""Scale-out: the harness on a local Ray instance, and results and checkpoints on PostgreSQL.

Slow, and skipped (with the reason) unless the ``scale`` extra is installed and, for PostgreSQL,
``PRAGMA_TEST_POSTGRES_URL`` names a server to use (a throwaway database: tables are created).
The default CI installs neither. To run them:

    pip install -e '.[dev,scale]'
    PRAGMA_TEST_POSTGRES_URL=postgresql://user:pw@localhost/pragma_test pytest -m slow tests/test_eval_scale.py
"""

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from rich.console import Console

from pragma.eval import harness
from pragma.eval.db import ResultsDB
from pragma.graph.context import resolve_context

EVAL_DATA = Path(__file__).parent / "data" / "eval"
sys.path.insert(0, str(EVAL_DATA))
import scripted_suite  # noqa: E402

SUITE = str(ROOT / "eval" / "suites" / "cpu")
PROBLEMS = ["leaky_relu", "max_reduction"]
pytestmark = pytest.mark.integration


@pytest.fixture
def scripted_everywhere(tmp_path, monkeypatch):
    """The scripted model in this process (forked workers) and, through the setup hook, in
    exec'd job processes (Ray tasks)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(scripted_suite.build_script(PROBLEMS)))
    monkeypatch.setenv("PRAGMA_EVAL_SCRIPT", str(script))
    monkeypatch.setenv("PRAGMA_EVAL_SETUP_HOOK", "scripted_suite:install")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(EVAL_DATA), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    )
    monkeypatch.setenv("PRAGMA_WARMUP_S", "0.05")
    monkeypatch.setattr("pragma.nodes.llm.load_chat_model", scripted_suite.loader_for(json.loads(script.read_text())))


def test_ray_runs_one_task_per_job(scripted_everywhere, isolated_data_dir):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'pragma-kernels[scale]')")
    ctx = resolve_context(coder_model="scripted:coder", max_iterations=1)
    settings = harness.RunSettings(problem_budget_s=900, ray_address="local")
    run_id = harness.create_run(
        SUITE, ["no-profile", "single-agent"], ctx, settings, patterns=PROBLEMS, run_id="on-ray"
    )
    counts = harness.execute(run_id, Console(file=open(os.devnull, "w")))
    assert counts == {"finished": 4}
    db = ResultsDB(str(isolated_data_dir / "eval" / "results.sqlite"))
    rows = db.problems(run_id)
    assert all(r["status"] == "finished" and r["solved"] for r in rows), rows
    # Each job ran in a process of its own, started by a Ray worker, not in this one.
    workers = {r["worker"] for r in rows}
    assert len(workers) == 4 and not any(w.endswith(f":{os.getpid()}") for w in workers)
    assert len(db.attempts(run_id)) == 4


def test_results_and_checkpoints_on_postgres(scripted_everywhere, tmp_path):
    url = os.environ.get("PRAGMA_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("no PostgreSQL server: set PRAGMA_TEST_POSTGRES_URL to a throwaway database")
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'pragma-kernels[scale]')")
    pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed")
    ctx = resolve_context(coder_model="scripted:coder", max_iterations=1)
    run_id = f"pg-{os.getpid()}"
    settings = harness.RunSettings(workers=2, problem_budget_s=900, results_url=url, checkpoint_url=url)
    harness.create_run(SUITE, ["no-profile"], ctx, settings, patterns=PROBLEMS, run_id=run_id)
    assert harness.execute(run_id, Console(file=open(os.devnull, "w")), results_url=url) == {"finished": 2}
    db = ResultsDB(url)
    assert {r["problem"] for r in db.problems(run_id) if r["solved"]} == set(PROBLEMS)
    assert len(db.attempts(run_id)) == 2
    # A resume finds nothing to do, and the report reads the same database.
    assert harness.execute(run_id, Console(file=open(os.devnull, "w")), results_url=url) == {}
    from pragma.eval.report import write_report

    written = write_report(run_id, tmp_path / "report", url)
    assert "| no-profile | 100.0% |" in (tmp_path / "report" / "report.md").read_text() and written
