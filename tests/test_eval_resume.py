"""Resume after SIGKILL mid-suite, the hard per-problem budget, and killing whole process trees."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, pragma_env
from rich.console import Console

from pragma.eval import harness, store, supervise
from pragma.eval.db import ResultsDB
from pragma.graph.context import resolve_context

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

EVAL_DATA = Path(__file__).parent / "data" / "eval"
sys.path.insert(0, str(EVAL_DATA))
import scripted_suite  # noqa: E402

CLI = str(EVAL_DATA / "scripted_suite.py")
SUITE = str(ROOT / "eval" / "suites" / "cpu")


def calls(log: Path) -> list[tuple[str, str, int]]:
    return [(e["problem"], e["role"], e["attempt"]) for e in map(json.loads, log.read_text().splitlines())]


def test_resume_after_sigkill_mid_suite_loses_no_finished_attempt(tmp_path, isolated_data_dir):
    # Sequential (one worker), so the kill lands at a known point: the first problem finished,
    # the second in the middle of its round, the third not started. The mode is a search mode
    # (beam, two candidates per round, written in parallel: issue 16), so the kill lands with the
    # round's first Coder call finished and its second hanging.
    problems = ["huber_elementwise", "leaky_relu", "max_reduction"]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(scripted_suite.build_script(problems)))
    log, marker = tmp_path / "llm.jsonl", tmp_path / "hanging"
    env = pragma_env(
        isolated_data_dir,
        PRAGMA_TEST_LLM_LOG=str(log),
        PRAGMA_TEST_HANG_AT="leaky_relu:coder:2",
        PRAGMA_TEST_HANG_MARKER=str(marker),
    )
    args = [
        sys.executable,
        CLI,
        str(script),
        "eval",
        "run",
        SUITE,
        "--mode",
        "no-profile",
        "--search",
        "beam",
        "--workers",
        "1",
        "--max-iterations",
        "2",
        "--coder-model",
        "scripted:coder",
        "--run-id",
        "killed",
    ]
    for p in problems:
        args += ["--problems", p]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 400

    def round_half_saved() -> bool:
        # leaky_relu's coder:2 hangs, and coder:1's candidate is a saved pending write of the round.
        if not marker.exists():
            return False
        conn = sqlite3.connect(str(isolated_data_dir / "eval" / "runs" / "killed" / "checkpoints.sqlite"))
        try:
            return (
                conn.execute(
                    "SELECT COUNT(*) FROM writes WHERE channel='drafts' AND thread_id LIKE '%leaky_relu'"
                ).fetchone()[0]
                >= 1
            )
        finally:
            conn.close()

    while not round_half_saved():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the harness and its worker, mid-suite
    proc.communicate(timeout=30)

    db = ResultsDB(str(isolated_data_dir / "eval" / "results.sqlite"))
    status = {r["problem"]: r["status"] for r in db.problems("killed")}
    assert set(status) == {"huber_elementwise", "leaky_relu", "max_reduction"}
    assert status == {
        "huber_elementwise": "finished",
        "leaky_relu": "running",
        "max_reduction": "pending",
    }, status
    assert {r["mode"] for r in db.problems("killed")} == {"no-profile+beam"}
    before = {(a["problem"], a["iteration"]): a for a in db.attempts("killed")}
    assert set(before) == {("huber_elementwise", 1), ("huber_elementwise", 2)}
    n_calls = len(calls(log))

    env.pop("PRAGMA_TEST_HANG_AT")
    resumed = subprocess.run(
        [sys.executable, CLI, str(script), "eval", "run", "--resume", "killed"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = calls(log)[n_calls:]
    # Nothing finished is redone: huber is skipped, leaky_relu continues at the killed call (its
    # round's finished call, coder:1, is not made again).
    assert not [c for c in after if c[0] == "huber_elementwise"]
    assert [c for c in after if c[0] == "leaky_relu"] == [("leaky_relu", "coder", 2)]
    # max_reduction (pending at the kill) starts afresh; its round's two Coder calls run in parallel,
    # so they may be logged in either order, each once.
    fresh = [c for c in after if c[0] == "max_reduction"]
    assert {("max_reduction", "coder", 1), ("max_reduction", "coder", 2)} <= set(fresh)
    assert len(fresh) == len(set(fresh)), fresh
    final = {(a["problem"], a["iteration"]): a for a in db.attempts("killed")}
    assert set(final) == {(p, i) for p in problems for i in (1, 2)}
    for key, row in before.items():  # recorded before the kill, kept as they were
        assert final[key]["recorded_at"] == row["recorded_at"] and final[key]["status"] == row["status"]
    assert all(r["status"] == "finished" for r in db.problems("killed"))
    assert db.run("killed")["status"] == "finished"


BUDGET_S = 40


def test_a_job_over_its_budget_is_killed_and_recorded(tmp_path, isolated_data_dir, monkeypatch):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"problems": {}, "default": {"coder": {"*": "never answered"}}}))
    marker = tmp_path / "hanging"
    # The scripted model through the setup hook, which forked and exec'd jobs both run.
    monkeypatch.setenv("PRAGMA_EVAL_SETUP_HOOK", "scripted_suite:install")
    monkeypatch.setenv("PRAGMA_EVAL_SCRIPT", str(script))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EVAL_DATA), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PRAGMA_TEST_HANG_AT", "leaky_relu:coder:1")
    monkeypatch.setenv("PRAGMA_TEST_HANG_MARKER", str(marker))
    # This process opens a Chroma store first, as a process that ran a Coder node in-process does:
    # a job forked from it used to hang in its first allocation (Chroma's native threads), so this
    # test once failed in CI only after tests/test_eval_modes.py. Jobs must still reach the model.
    from pragma.knowledge import store as knowledge_store

    knowledge_store.client()
    assert supervise.fork_unsafe_reason()
    ctx = resolve_context(coder_model="scripted:coder", max_iterations=2)
    run_id = harness.create_run(
        SUITE,
        ["single-agent"],
        ctx,
        harness.RunSettings(workers=1, problem_budget_s=BUDGET_S),
        patterns=["leaky_relu"],
        run_id="budget",
    )
    started = time.monotonic()
    counts = harness.execute(run_id, Console(file=open(os.devnull, "w")))
    assert counts == {"budget_exceeded": 1}
    assert time.monotonic() - started < 120
    [row] = ResultsDB(store.default_results_url()).problems(run_id)
    assert row["status"] == "budget_exceeded" and f"budget of {BUDGET_S} s" in row["message"]
    assert row["wall_s"] >= BUDGET_S and not row["solved"]
    # The job must have reached the hanging LLM call (setup took ~5 s here; a CI run once spent
    # over 25 s in setup, so the budget leaves room): else the kill proved nothing about hangs.
    assert marker.exists(), f"the job never reached its first Coder call within {BUDGET_S} s: {row['message']}"
    hung_pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(hung_pid, 0)
    # Over-budget jobs are final: a resume has nothing left to do.
    assert harness.execute(run_id, Console(file=open(os.devnull, "w"))) == {}


def test_kill_tree_reaches_descendants_in_other_sessions():
    """Sandboxes run in sessions of their own: killing the job's group would miss them."""
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    grandchild = int(parent.stdout.readline())
    assert supervise.kill_tree(parent.pid) == 2
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)  # still there (a zombie until init reaps it) or gone
            with open(f"/proc/{grandchild}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the grandchild in its own session survived kill_tree")
