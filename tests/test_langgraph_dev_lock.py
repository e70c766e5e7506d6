"""Issue 17.1 under `langgraph dev` (what Studio talks to): a run on a thread that another live
process advances (a CLI run of the same thread id) fails in its first node with the one-line
RunLocked message, and that node does nothing (no problem load, no LLM call)."""

from __future__ import annotations

import uuid

import pytest
from conftest import FLOW_RELU
from test_langgraph_dev import LANGGRAPH, RUN_TIMEOUT_S, _log_tail, server  # noqa: F401  (the fixture)
from test_run_lock import held_elsewhere

pytestmark = [pytest.mark.integration, pytest.mark.skipif(LANGGRAPH is None, reason="langgraph CLI not installed")]


def test_studio_run_on_a_live_thread_fails_with_the_holders_line(server, tmp_path):  # noqa: F811
    client, log = server
    thread_id = str(uuid.uuid4())
    assert client.post("/threads", json={"thread_id": thread_id}).status_code == 200
    with held_elsewhere(thread_id, tmp_path / "pragma-data") as other:
        run = client.post(
            f"/threads/{thread_id}/runs/wait",
            timeout=RUN_TIMEOUT_S,
            json={
                "assistant_id": "pragma",
                "input": {"problem": {"path": str(FLOW_RELU)}},
                "context": {"coder_model": "scripted:coder", "max_iterations": 1},
            },
        )
    assert run.status_code == 200, run.text
    error = str(run.json().get("__error__"))
    assert f"run {thread_id} is being advanced by pid {other.pid}" in error, f"{run.text}\n{_log_tail(log)}"
    stored = client.get(f"/threads/{thread_id}/state").json()
    assert "hardware" not in (stored.get("values") or {}) and not (stored.get("values") or {}).get("attempts")
