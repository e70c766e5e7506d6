"""Issue 16: a beam search run through the real CLI, SIGKILLed in the middle of a round twice
(while one of the round's parallel Coder calls hangs, then while one of its parallel reviews
hangs) and resumed each time. The fake endpoint's log shows no finished LLM call repeated, the
checkpoints show no candidate verified twice, and the report draws the lineage.

Real parts: the installed CLI, the SQLite checkpointer, g++, the sandboxed verifier, SIGKILL; the
only fake is the LLM endpoint (tests/fake_openai.py), serving relu_script's real kernels.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import FLOW_RELU, pragma_env
from fake_openai import FakeOpenAI
from test_kill_each_node import cli, kill, script, state_of, wait_for

from pragma.graph import runs
from pragma.graph.builder import compile_app

pytestmark = pytest.mark.integration
ARGS = [
    "--coder-model",
    "openai:fake-model",
    "--max-iterations",
    "4",
    "--set",
    "profile_simulate=never",
    "--set",
    "search=beam",
    "--set",
    "candidates_per_round=2",
]


def saved_writes(data_dir: Path, thread_id: str, channel: str) -> int:
    """Pending writes the checkpointer holds for ``channel``: a finished task of an unfinished step."""
    conn = sqlite3.connect(str(data_dir / "checkpoints.sqlite"))
    try:
        return conn.execute(
            "SELECT COUNT(*) FROM writes WHERE thread_id=? AND channel=?", (thread_id, channel)
        ).fetchone()[0]
    finally:
        conn.close()


def steps(thread_id: str) -> list[tuple[str, ...]]:
    with runs.checkpointer() as saver:
        history = compile_app(saver).get_state_history({"configurable": {"thread_id": thread_id}})
        return [snap.next for snap in reversed(list(history)) if snap.next]


def test_beam_round_killed_twice_mid_round_resumes_without_repeats_and_draws_the_lineage(tmp_path, isolated_data_dir):
    # Round 1: coder:1 (compile error) and coder:2 (wrong) in parallel; reviews: repair of each
    # (conductor:1, conductor:2) in parallel. Round 2: each lineage repaired: coder:3 (slow), coder:4 (fast).
    hung = ("coder:2", "conductor:2")
    out_dir = tmp_path / "out"
    with FakeOpenAI(script(hung)) as fake:
        env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=fake.base_url)

        def start(*args: str) -> subprocess.Popen:
            return subprocess.Popen(cli(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        proc = start("optimize", str(FLOW_RELU), *ARGS, "--out", str(out_dir))
        thread_id = proc.stdout.readline().split()[1]
        # Kill 1: coder:1's candidate is saved as a pending write of the round's step, coder:2 hangs.
        wait_for(
            "a finished and a hung Coder call of round 1",
            lambda: fake.count("coder:2") >= 1 and saved_writes(isolated_data_dir, thread_id, "drafts") >= 1,
            proc,
        )
        kill(proc)
        assert "expand" in state_of(thread_id).next
        proc = start("optimize", "--resume", thread_id)
        # Kill 2: both candidates verified; conductor:1's repair advice saved, conductor:2 hangs.
        wait_for(
            "a finished and a hung review of round 1",
            lambda: fake.count("conductor:2") >= 1 and saved_writes(isolated_data_dir, thread_id, "reviews") >= 1,
            proc,
        )
        kill(proc)
        assert "review" in state_of(thread_id).next
        proc = start("optimize", "--resume", thread_id)
        output = proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, output
        keys = [r["key"] for r in fake.requests]
        answered = [a["key"] for a in fake.answered]

    # No finished LLM call repeated: every key answered once; the hung ones were sent once more.
    assert sorted(answered) == ["coder:1", "coder:2", "coder:3", "coder:4", "conductor:1", "conductor:2"], answered
    assert sorted(keys) == sorted(answered + list(hung)), keys
    values = state_of(thread_id).values
    lineage = {a["iteration"]: (a["parent"], a["branch"], a["round"], a["status"]) for a in values["attempts"]}
    assert lineage == {
        1: (0, 0, 1, "compile_error"),
        2: (0, 1, 1, "mismatch"),
        3: (1, 0, 2, "ok"),
        4: (2, 1, 2, "ok"),
    }
    assert values["attempts"][2]["diff"].startswith("--- attempt 1")  # the repair's diff against its parent
    # No candidate verified twice: one verify_next step per candidate in the whole history.
    assert sum(1 for s in steps(thread_id) if s == ("verify_next",)) == 4
    assert [s.count("expand") for s in steps(thread_id) if "expand" in s][:1] == [2]  # the fan-out
    # relu_fast (#4) is accepted over relu_slow (#3); its final review profiled it without an LLM call.
    assert values["best"]["iteration"] == 4 and values["best"]["profile"]["status"] == "ok"
    assert values["usage"]["llm_calls"] == 6
    report = (out_dir / "report.md").read_text()
    assert "- search: beam, 2 candidate(s) per round" in report and "- spent: 6 LLM calls" in report
    assert "  - #4 repair · ok" in report and "the best" in report and "n2 --> n4" in report
    page = (out_dir / "report.html").read_text()
    assert page.count("<li>") == 4 and "diff against #2" in page
