"""`pragma doctor` gives a verdict per facility and fails on a dead LLM endpoint."""

import subprocess
import sys

import pytest
from conftest import pragma_env
from fake_openai import FakeOpenAI
from test_llm_endpoint import dead_port

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)


def doctor(env):
    return subprocess.run(
        [sys.executable, "-m", "pragma.graph.cli", "doctor"], env=env, capture_output=True, text=True, timeout=300
    )


def test_doctor_with_a_live_endpoint(isolated_data_dir):
    with FakeOpenAI({}) as fake:
        proc = doctor(
            pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=fake.base_url, PRAGMA_CODER_MODEL="openai:fake-model")
        )
    lines = {line.split()[1]: line.split()[0] for line in proc.stdout.splitlines() if not line.startswith(" ")}
    assert lines["llm"] == "ok" and lines["compiler"] == "ok" and lines["checkpointer"] == "ok", proc.stdout
    assert set(lines) >= {"perf", "valgrind", "objdump", "knowledge"}
    assert proc.returncode == (1 if "FAIL" in lines.values() else 0)


def test_doctor_fails_on_a_dead_endpoint_and_says_how_to_fix(isolated_data_dir):
    url = f"http://127.0.0.1:{dead_port()}/v1"
    proc = doctor(pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=url, PRAGMA_CODER_MODEL="openai:m"))
    assert proc.returncode == 1
    assert f"cannot reach {url}" in proc.stdout and "fix: start the server" in proc.stdout
