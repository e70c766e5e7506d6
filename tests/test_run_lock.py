"""Issue 17.1: one live process per run. A second process on a thread that a live process advances
(`optimize --resume`, `eval run --resume`, an eval job, a graph run as Studio starts it) is refused
with one line naming the holder and writes nothing; a SIGKILLed holder frees the thread at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import EXAMPLES, FLOW_RELU, pragma_env
from fake_openai import FakeOpenAI
from rich.console import Console

from pragma.eval import harness, job, store
from pragma.eval.db import ResultsDB
from pragma.graph import lock, runs
from pragma.graph.context import resolve_context

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

HOLDER = (
    "import sys, time\nfrom pragma.graph import lock\n"
    "held = lock.hold(sys.argv[1])\nheld.__enter__()\nprint('held', flush=True)\ntime.sleep(600)\n"
)


@contextmanager
def held_elsewhere(name: str, data_dir) -> Iterator[subprocess.Popen]:
    """Another live process holding ``name``'s lock."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, name], env=pragma_env(data_dir), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_lock_names_the_holder_and_is_free_the_moment_the_holder_is_killed(isolated_data_dir):
    with held_elsewhere("t1", isolated_data_dir) as other:
        with pytest.raises(lock.RunLocked) as refused:
            with lock.hold("t1"):
                pass
        line = str(refused.value)
        assert f"pid {other.pid} on {socket.gethostname()} since " in line and "\n" not in line
        assert lock.holder("t1")["pid"] == other.pid
        os.kill(other.pid, signal.SIGKILL)
        other.wait()
        with lock.hold("t1"):  # at once: the kernel released the dead process's lock
            with lock.hold("t1"):  # re-entrant in one process
                assert lock.holder("t1")["pid"] == os.getpid()
    assert lock.holder("t1") is None


def _child_tries(name: str, queue) -> None:
    try:
        with lock.hold(name):
            queue.put("got it")
    except lock.RunLocked:
        queue.put("refused")


def test_a_forked_child_does_not_inherit_its_parents_lock():
    queue = multiprocessing.get_context("fork").SimpleQueue()
    with lock.hold("parent-thread"):
        for name, expected in (("parent-thread", "refused"), ("child-thread", "got it")):
            child = multiprocessing.get_context("fork").Process(target=_child_tries, args=(name, queue))
            child.start()
            child.join(30)
            assert queue.get() == expected
        assert lock.holder("parent-thread")["pid"] == os.getpid()  # the child's exit did not free it


def test_optimize_resume_of_a_live_run_is_refused_and_writes_nothing(isolated_data_dir, tmp_path):
    runs.register(
        "relu-live",
        str(FLOW_RELU),
        str(tmp_path / "out"),
        {"coder_model": "openai:fake-model", "max_iterations": 2},
    )
    before = runs.get("relu-live")
    with FakeOpenAI({}) as fake, held_elsewhere("relu-live", isolated_data_dir) as other:
        env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=fake.base_url)
        done = subprocess.run(
            [sys.executable, "-m", "pragma.graph.cli", "optimize", "--resume", "relu-live"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        listed = subprocess.run(
            [sys.executable, "-m", "pragma.graph.cli", "runs"], env=env, capture_output=True, text=True, timeout=120
        ).stdout
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: run relu-live is being advanced by pid") and f"pid {other.pid}" in line
    assert not done.stdout.strip() and not fake.requests
    assert runs.get("relu-live") == before and not (tmp_path / "out").exists()
    assert not (isolated_data_dir / "checkpoints.sqlite").exists()
    assert "relu-live  running" in listed  # alive: still running
    # Its holder gone, the registry's "running" is shown for what it is.
    shown = runs.with_live_status(runs.list_runs())
    assert shown[0]["status"] == "killed"


def _suite_run(run_id: str) -> str:
    ctx = resolve_context(coder_model="openai:fake-model", max_iterations=1)
    return harness.create_run(
        str(EXAMPLES), ["pragma"], ctx, harness.RunSettings(workers=1), patterns=["relu"], run_id=run_id
    )


def test_eval_resume_of_a_live_run_is_refused_and_writes_nothing(isolated_data_dir):
    run_id = _suite_run("live")
    db = ResultsDB(store.default_results_url())
    before = (db.run(run_id), db.problems(run_id))
    with FakeOpenAI({}) as fake, held_elsewhere(lock.eval_run_name(run_id), isolated_data_dir) as other:
        env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=fake.base_url)
        done = subprocess.run(
            [sys.executable, "-m", "pragma.graph.cli", "eval", "run", "--resume", run_id],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stdout + done.stderr
        [line] = done.stderr.strip().splitlines()
        assert f"evaluation run {run_id} is being advanced by pid {other.pid}" in line
        assert not done.stdout.strip() and not fake.requests
        # In-process too (the check in the CLI aside, execute itself takes the lock first).
        with pytest.raises(lock.RunLocked):
            harness.execute(run_id, Console(file=open(os.devnull, "w")))
    assert (db.run(run_id), db.problems(run_id)) == before


def test_an_eval_job_on_a_live_thread_is_left_to_its_process(isolated_data_dir):
    run_id = _suite_run("jobs")
    db = ResultsDB(store.default_results_url())
    specs, _ = harness.plan(db, db.run(run_id))
    [spec] = specs
    before = db.problems(run_id)
    thread = store.thread_id(spec.run_id, spec.mode, spec.problem["name"])
    with held_elsewhere(thread, isolated_data_dir):
        assert job.run_job(spec) == "locked"
    assert db.problems(run_id) == before and not db.attempts(run_id)
    assert not os.path.exists(spec.checkpoint_url) or _rows(spec.checkpoint_url) == 0


def _rows(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def test_a_graph_run_on_a_live_thread_fails_in_its_first_node_with_one_line(isolated_data_dir):
    """What a Studio / langgraph dev run on a thread the CLI advances meets (the served ``graph``
    has no checkpointer of PRAGMA's; its nodes take the thread's lock)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from pragma.graph.builder import compile_app

    ctx = resolve_context(coder_model="openai:fake-model", max_iterations=1)
    app = compile_app(InMemorySaver())
    config = {"configurable": {"thread_id": "studio-thread"}}
    with FakeOpenAI({}) as fake, held_elsewhere("studio-thread", isolated_data_dir) as other:
        with pytest.raises(lock.RunLocked) as refused:
            app.invoke({"problem": {"path": str(FLOW_RELU)}}, config, context=ctx)
        assert f"run studio-thread is being advanced by pid {other.pid}" in str(refused.value)
        assert not fake.requests
    state = app.get_state(config)
    assert state.next == ("setup",) and "hardware" not in state.values  # setup did nothing
    json.dumps(state.values)
