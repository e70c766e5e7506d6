"""PRAGMA served by a real ``langgraph dev`` server, driven over HTTP with the scripted model.

This is the deployment check for ``langgraph.json``: the graph must load in the LangGraph API
server (which brings its own checkpointer), accept run settings as run-level ``context`` and
expose its routers as conditional edges for Studio.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import FLOW_RELU

# Prefer the CLI next to this interpreter so the server imports the same pragma and langgraph.
LANGGRAPH = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which("langgraph")
STARTUP_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 600.0
SHUTDOWN_TIMEOUT_S = 15.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the server colours its log even into a file

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(LANGGRAPH is None, reason="langgraph CLI not installed (pip install 'langgraph-cli[inmem]')"),
]

# The server imports this instead of graph/builder.py directly so that every LLM call in the
# server process goes to the scripted model; nodes look the seam up as ``llm.load_chat_model``
# at call time, so patching the module attribute before the graph runs is enough.
ENTRY_MODULE = """\
import sys

sys.path.insert(0, {tests_dir!r})

import scripted
import pragma.nodes.llm

pragma.nodes.llm.load_chat_model = scripted.loader_for(scripted.relu_script())

from pragma.graph.builder import graph
"""


def _free_port() -> int:
    # The port is released before the server binds it; a collision is possible but rare, and
    # far less likely than with the fixed default 2024, which is often taken on shared machines.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _log_tail(log: Path, chars: int = 6000) -> str:
    try:
        return ANSI.sub("", log.read_text(errors="replace"))[-chars:]
    except OSError as exc:
        return f"<no server log: {exc}>"


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _stop(proc: subprocess.Popen) -> None:
    # Signal the whole session, not just the CLI: uvicorn workers (and a reloader, when reload is
    # on) are its children and may outlive it.
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc, signal.SIGKILL)
    proc.wait(timeout=SHUTDOWN_TIMEOUT_S)


def _wait_healthy(client: httpx.Client, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited with {proc.returncode} before becoming healthy:\n{_log_tail(log)}")
        try:
            if client.get("/ok", timeout=5).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last_error = repr(exc)
        time.sleep(0.5)
    pytest.fail(f"langgraph dev not healthy after {STARTUP_TIMEOUT_S:.0f} s ({last_error}):\n{_log_tail(log)}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[httpx.Client, Path]]:
    """A `langgraph dev` server serving the scripted PRAGMA graph; yields (client, log path)."""
    # Run from a scratch directory: the server writes .langgraph_api/ into its cwd, and PRAGMA's
    # runtime files must stay out of any watched project folder.
    workdir = tmp_path / "server"
    workdir.mkdir()
    tests_dir = str(Path(__file__).resolve().parent)
    (workdir / "scripted_graph.py").write_text(ENTRY_MODULE.format(tests_dir=tests_dir))
    # Graph paths and dependencies resolve against the cwd, not against the config file's folder.
    (workdir / "langgraph.json").write_text(
        json.dumps(
            {
                "python_version": "3.11",
                "dependencies": ["."],
                "graphs": {"pragma": "./scripted_graph.py:graph"},
            }
        )
    )
    data_dir = tmp_path / "pragma-data"
    data_dir.mkdir()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "PRAGMA_DATA_DIR": str(data_dir),
        "PYTHONUNBUFFERED": "1",
    }
    port = _free_port()
    log = tmp_path / "langgraph-dev.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [LANGGRAPH, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            _wait_healthy(client, proc, log)
            yield client, log
    finally:
        _stop(proc)


def test_langgraph_dev_serves_pragma_and_runs_it_to_the_fastest_kernel(server):
    client, log = server

    [assistant] = client.post("/assistants/search", json={"graph_id": "pragma"}).json()
    drawn = client.get(f"/assistants/{assistant['assistant_id']}/graph")
    assert drawn.status_code == 200, drawn.text
    edges = {(e["source"], e["target"]): e.get("conditional", False) for e in drawn.json()["edges"]}
    # Routers return Literal[...] node names, which is what lets the server draw these branches.
    assert edges.get(("verifier", "repair")) is True, edges
    assert edges.get(("verifier", "profiler")) is True, edges
    assert edges.get(("coder", "verifier")) is False, edges
    # The search rounds' fan-outs (Send) are drawn too: plan -> expand, verify_next -> review.
    assert edges.get(("plan", "expand")) is True and edges.get(("verify_next", "review")) is True, edges
    assert edges.get(("expand", "verify_next")) is False and edges.get(("setup", "plan")) is True, edges

    thread = client.post("/threads", json={})
    assert thread.status_code == 200, thread.text
    thread_id = thread.json()["thread_id"]

    run = client.post(
        f"/threads/{thread_id}/runs/wait",
        json={
            "assistant_id": "pragma",
            "input": {"problem": {"path": str(FLOW_RELU)}},
            # Run-level context becomes the graph's Context; the server rejects it combined with
            # config.configurable, so settings go here only.
            "context": {
                "coder_model": "scripted:coder",
                "max_iterations": 4,
                "timed_calls": 10,
                "warmup_calls": 2,
                "profile_calls": 5,
            },
        },
        timeout=RUN_TIMEOUT_S,
    )
    assert run.status_code == 200, f"{run.status_code} {run.text}\n{_log_tail(log)}"
    state = run.json()
    # runs/wait answers 200 even when the graph raised; the error comes back in the body.
    assert "__error__" not in state, f"{state['__error__']}\n{_log_tail(log)}"

    statuses = [a["status"] for a in state["attempts"]]
    assert statuses == ["compile_error", "mismatch", "ok", "ok"], f"{statuses}\n{_log_tail(log)}"
    assert state["best"]["iteration"] == 4
    assert state["best"]["speedup"] > 0
    assert state["best"]["profile"]["status"] == "ok"

    # The server's own checkpointer kept the thread: its stored state is the final state.
    stored = client.get(f"/threads/{thread_id}/state").json()
    assert stored["next"] == []
    assert stored["values"]["best"]["iteration"] == 4
