"""Issue 17: the real CLI is SIGKILLed during each node in turn and resumed by a new process; the
scripted OpenAI-compatible endpoint's request log shows no finished request repeated and none
missing, and the attempts equal an uninterrupted run's. A second process on a live run is refused
with one line, writes nothing and sends no request.

Real parts: the installed CLI (``python -m pragma.graph.cli``), the SQLite checkpointer, SIGKILL;
the only fake is the LLM endpoint (tests/fake_openai.py).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import scripted
from conftest import FLOW_RELU, pragma_env
from fake_openai import FakeOpenAI

from pragma.graph import runs
from pragma.graph.builder import compile_app

pytestmark = pytest.mark.integration
HANG = {"hang_s": 300}  # a request the endpoint never answers in time: the CLI is killed meanwhile
ARGS = ["--coder-model", "openai:fake-model", "--max-iterations", "4", "--set", "profile_simulate=never"]


def script(hang: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    """relu_script's replies keyed as the endpoint sees them; ``hang`` keys hang on their first request."""
    replies = {f"{role}:{k}": [{"content": v}] for role, d in scripted.relu_script().items() for k, v in d.items()}
    for key in hang:
        replies[key] = [HANG, *replies[key]]
    return replies


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pragma.graph.cli", *args]


def state_of(thread_id: str):
    with runs.checkpointer() as saver:
        return compile_app(saver).get_state({"configurable": {"thread_id": thread_id}})


def checkpoint_rows(data_dir: Path) -> int:
    conn = sqlite3.connect(str(data_dir / "checkpoints.sqlite"))
    try:
        return conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    finally:
        conn.close()


def wait_for(what: str, condition, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert proc.poll() is None, f"the CLI ended before {what}:\n{proc.communicate()[0]}"
        assert time.monotonic() < deadline, f"never reached {what}"
        time.sleep(0.05)


def kill(proc: subprocess.Popen) -> str:
    os.kill(proc.pid, signal.SIGKILL)  # the CLI process itself, not its group
    return proc.communicate(timeout=60)[0]


def attempts(thread_id: str) -> list[tuple[int, str, str]]:
    values = state_of(thread_id).values
    return [(a["iteration"], a["status"], a["code_sha256"]) for a in values["attempts"]]


def uninterrupted(tmp_path: Path) -> tuple[list[str], list[tuple[int, str, str]], int]:
    data = tmp_path / "plain-data"
    data.mkdir()
    with FakeOpenAI(script()) as fake:
        env = pragma_env(data, PRAGMA_LLM_BASE_URL=fake.base_url)
        done = subprocess.run(
            cli("optimize", str(FLOW_RELU), *ARGS, "--out", str(tmp_path / "plain")),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        keys = [r["key"] for r in fake.requests]
    code = (
        "import json; from pragma.graph import runs; from pragma.graph.builder import compile_app\n"
        "[r] = runs.list_runs()\n"
        "with runs.checkpointer() as s:\n"
        "    v = compile_app(s).get_state({'configurable': {'thread_id': r['thread_id']}}).values\n"
        "print(json.dumps([[a['iteration'], a['status'], a['code_sha256']] for a in v['attempts']]"
        " + [v['best']['iteration']]))"
    )
    import json

    shown = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], env=pragma_env(data), capture_output=True, text=True, timeout=120, check=True
        ).stdout
    )
    return keys, [tuple(a) for a in shown[:-1]], shown[-1]


def test_sigkill_in_every_node_then_resume_repeats_and_loses_nothing(tmp_path, isolated_data_dir):
    plain_keys, plain_attempts, plain_best = uninterrupted(tmp_path)

    hung = ("coder:1", "conductor:1", "conductor:3")  # coder, repair, conductor
    out_dir = tmp_path / "out"
    with FakeOpenAI(script(hung)) as fake:
        env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=fake.base_url)
        proc = subprocess.Popen(
            cli("optimize", str(FLOW_RELU), *ARGS, "--out", str(out_dir)),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        first_line = proc.stdout.readline()
        thread_id = first_line.split()[1]
        killed_in = []

        def next_is(node: str):
            return lambda: state_of(thread_id).next == (node,)

        def request_seen(key: str):
            return lambda: fake.count(key) >= 1

        def resume() -> subprocess.Popen:
            return subprocess.Popen(
                cli("optimize", "--resume", thread_id),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )

        # (node the kill lands in, condition that proves the CLI is inside it)
        plan = [
            ("setup", next_is("setup")),
            ("coder", request_seen("coder:1")),
            ("verifier", next_is("verifier")),
            ("repair", request_seen("conductor:1")),
            ("profiler", next_is("profiler")),
            ("conductor", request_seen("conductor:3")),
        ]
        for i, (node, inside) in enumerate(plan):
            wait_for(f"the {node} node", inside, proc)
            if node == "coder":
                # A second process on the live run: refused with one line, nothing written, no request.
                rows, sent = checkpoint_rows(isolated_data_dir), len(fake.requests)
                registry = runs.get(thread_id)
                second = subprocess.run(
                    cli("optimize", "--resume", thread_id), env=env, capture_output=True, text=True, timeout=120
                )
                assert second.returncode == 2, second.stdout + second.stderr
                lines = second.stderr.strip().splitlines()
                assert len(lines) == 1 and f"pid {proc.pid}" in lines[0] and os.uname().nodename in lines[0], lines
                assert "Traceback" not in second.stderr and not second.stdout.strip()
                time.sleep(0.5)
                assert checkpoint_rows(isolated_data_dir) == rows and len(fake.requests) == sent
                assert runs.get(thread_id) == registry
                assert not (out_dir / "best.py").exists() and not (out_dir / "report.md").exists()
            kill(proc)
            assert state_of(thread_id).next == (node,), f"kill {i} did not land in {node}"
            killed_in.append(node)
            proc = resume()  # at once: the dead process's lock went with it
        output = proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, output
        keys = [r["key"] for r in fake.requests]
        answered = [a["key"] for a in fake.answered]

    assert killed_in == ["setup", "coder", "verifier", "repair", "profiler", "conductor"]
    # Every answered request once, in the uninterrupted run's order; the only extra requests are
    # the ones in flight when the process died (never answered), each sent once more.
    assert answered == plain_keys, (answered, plain_keys)
    assert sorted(keys) == sorted(plain_keys + list(hung)), keys
    assert attempts(thread_id) == plain_attempts
    assert state_of(thread_id).values["best"]["iteration"] == plain_best
    assert (out_dir / "best.py").exists() and (out_dir / "report.md").exists()
    listed = subprocess.run(cli("runs"), env=env, capture_output=True, text=True, timeout=120).stdout
    assert thread_id in listed and "finished" in listed
