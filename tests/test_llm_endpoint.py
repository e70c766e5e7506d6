"""The LLM layer against a real OpenAI-compatible HTTP server on loopback (scripted behaviour):
retries on 429, timeouts, <think> stripping, malformed JSON re-ask, accounting, errors, replay."""

import io
import json
import socket
import subprocess
import sys

import pytest
import scripted
from conftest import FLOW_RELU, pragma_env
from fake_openai import FakeOpenAI
from rich.console import Console

from pragma.graph import runner, runs
from pragma.graph.builder import compile_app
from pragma.graph.context import resolve_context
from pragma.nodes import recording
from pragma.tools.problem import read_problem

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

GUIDANCE = {
    "diagnosis": "scalar loop at -O0",
    "bottleneck": "not-vectorized",
    "steps": ["compile at -O3 with omp simd"],
    "extra_metrics": [],
    "stop": False,
}


def script() -> dict:
    c = scripted.code_reply
    return {
        "coder:1": [{"status": 429}, {"content": c("relu_compile_error.py")}],
        "coder:2": [
            {"content": "<think>maybe leaky? ```python\nclass ModelNew: pass\n```</think>" + c("relu_wrong.py")}
        ],
        "coder:3": [{"content": c("relu_slow.py")}],
        "coder:4": [{"content": c("relu_fast.py")}],
        "conductor:1": [{"content": "Missing semicolon in the C++ source."}],
        "conductor:2": [{"content": "Negative inputs must give 0."}],
        "conductor:3": [
            {"hang_s": 6},
            {"content": "I think it is not vectorized {oops"},
            {"content": "```json\n" + json.dumps(GUIDANCE) + "\n```"},
        ],
    }


def state_of(thread_id: str) -> dict:
    with runs.checkpointer() as saver:
        return compile_app(saver).get_state({"configurable": {"thread_id": thread_id}}).values


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_full_run_over_http_with_retry_timeout_reask_accounting_and_replay(monkeypatch, tmp_path, isolated_data_dir):
    with FakeOpenAI(script()) as fake:
        monkeypatch.setenv("PRAGMA_LLM_BASE_URL", fake.base_url)
        ctx = resolve_context(coder_model="openai:fake-model", max_iterations=4, llm_timeout_s=2.0)
        buf = io.StringIO()
        code = runner.start_run(read_problem(FLOW_RELU), ctx, tmp_path / "out", Console(file=buf, width=200))
        assert code == 0, buf.getvalue()
    assert fake.count("coder:1") == 2  # 429, then retried by the RetryPolicy
    assert fake.count("conductor:3") == 3  # timed out, then malformed JSON, then the re-ask
    [run] = runs.list_runs()
    state = state_of(run["thread_id"])
    assert [a["status"] for a in state["attempts"]] == ["compile_error", "mismatch", "ok", "ok"]
    assert state["best"]["iteration"] == 4
    assert state["guidance"]["bottleneck"] == "not-vectorized" and "omp simd" in state["guidance"]["text"]
    # Accounting: exactly what the server said it served, once per answered request.
    assert state["usage"]["input_tokens"] == sum(a["prompt_tokens"] for a in fake.answered)
    assert state["usage"]["output_tokens"] == sum(a["completion_tokens"] for a in fake.answered)
    assert state["usage"]["llm_calls"] == len(fake.answered) == 8
    # The log keeps reasoning and hashes; the parsed code ignored the draft inside <think>.
    entries = recording.read_log(run["thread_id"])
    assert len(entries) == 8
    coder2 = next(e for e in entries if e["node"] == "coder" and e["attempt"] == 2)
    assert "<think>maybe leaky?" in coder2["reply"]
    assert coder2["prompt_sha256"] == recording.sha256(
        recording.prompt_text([type("M", (), {"type": m["type"], "content": m["content"]}) for m in coder2["messages"]])
    )
    assert state["attempts"][1]["status"] == "mismatch"  # the real module, not the draft, was verified
    assert "## LLM usage" in (tmp_path / "out" / "report.md").read_text()

    # Replay: the whole loop again with no server at all.
    env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=f"http://127.0.0.1:{dead_port()}/v1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pragma.graph.cli",
            "optimize",
            "--replay",
            run["thread_id"],
            "--out",
            str(tmp_path / "replay"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    replay = next(r for r in runs.list_runs() if r["thread_id"] != run["thread_id"])
    replayed = state_of(replay["thread_id"])
    assert [a["status"] for a in replayed["attempts"]] == ["compile_error", "mismatch", "ok", "ok"]
    assert [a["code_sha256"] for a in replayed["attempts"]] == [a["code_sha256"] for a in state["attempts"]]
    assert replayed["best"]["iteration"] == 4 and replayed["usage"]["input_tokens"] == 0


@pytest.mark.parametrize(
    "steps, message",
    [
        ([{"status": 401}], "rejected the API key"),
        ([{"status": 404}], "does not know the model"),
    ],
)
def test_endpoint_errors_are_one_line(isolated_data_dir, steps, message):
    with FakeOpenAI({"coder:1": steps}) as fake:
        env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=fake.base_url, PRAGMA_LLM_API_KEY="k")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pragma.graph.cli",
                "optimize",
                str(FLOW_RELU),
                "--coder-model",
                "openai:fake-model",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 2
    assert message in proc.stderr and fake.base_url in proc.stderr and "Traceback" not in proc.stderr
    assert fake.count("coder:1") == 1  # not transient: no retries


def test_unreachable_endpoint_names_the_url_after_retries(isolated_data_dir):
    url = f"http://127.0.0.1:{dead_port()}/v1"
    env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=url)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pragma.graph.cli",
            "optimize",
            str(FLOW_RELU),
            "--coder-model",
            "openai:fake-model",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"cannot reach the LLM endpoint {url}" in proc.stderr and "Traceback" not in proc.stderr


def test_price_table_and_token_budget_end_the_run_keeping_the_best(monkeypatch, tmp_path, isolated_data_dir):
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"openai:fake-model": {"input_usd_per_1m_tokens": 1.0, "output_usd_per_1m_tokens": 2.0}})
    )
    steps = script()
    steps["coder:1"] = [{"content": scripted.code_reply("relu_slow.py")}]
    steps["conductor:1"] = [{"content": "```json\n" + json.dumps(GUIDANCE) + "\n```"}]
    with FakeOpenAI(steps) as fake:
        monkeypatch.setenv("PRAGMA_LLM_BASE_URL", fake.base_url)
        # The first coder and conductor calls together exceed 2000 tokens: no further coder call.
        ctx = resolve_context(
            coder_model="openai:fake-model", max_iterations=4, price_table_path=str(prices), max_tokens_total=2000
        )
        code = runner.start_run(read_problem(FLOW_RELU), ctx, tmp_path / "out", Console(file=io.StringIO()))
    assert code == 0
    [run] = runs.list_runs()
    state = state_of(run["thread_id"])
    used_in, used_out = state["usage"]["input_tokens"], state["usage"]["output_tokens"]
    assert used_in + used_out >= 2000 and state["iteration"] == 1 and fake.count("coder:2") == 0
    assert state["best"]["iteration"] == 1
    assert state["usage"]["cost_usd"] == pytest.approx((used_in * 1.0 + used_out * 2.0) / 1e6)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "token budget spent" in report and "cost USD" in report
