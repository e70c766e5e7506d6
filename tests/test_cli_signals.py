"""Stopping `pragma optimize` while it waits on the LLM: Ctrl-C and SIGTERM both leave a stopped,
resumable run (checkpointed setup, registry status) and a one-line message, never a traceback."""

import signal
import subprocess
import sys
import time

import pytest
from conftest import FLOW_RELU, pragma_env
from fake_openai import FakeOpenAI

from pragma.graph import runs
from pragma.graph.builder import compile_app

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)


def _as_from_a_terminal() -> None:
    # A shell without job control starts background jobs (CI runners, `make ... &`) with SIGINT
    # ignored, and children inherit that; a user at a terminal has the default action.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_signal_during_llm_call_stops_the_run_resumably(isolated_data_dir, tmp_path, sig, code, word):
    with FakeOpenAI({"coder:1": [{"hang_s": 120}]}) as fake:
        env = pragma_env(isolated_data_dir, PRAGMA_LLM_BASE_URL=fake.base_url)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pragma.graph.cli",
                "optimize",
                str(FLOW_RELU),
                "--coder-model",
                "openai:fake-model",
                "--out",
                str(tmp_path / "out"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_as_from_a_terminal,
        )
        deadline = time.monotonic() + 240
        while not fake.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert fake.requests, "the Coder never called the model"
        sent = time.monotonic()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
        waited_s = time.monotonic() - sent
    assert proc.returncode == code, stderr
    assert waited_s < 30  # not the 120 s the server hangs, nor the LLM timeout
    assert f"{word} (pragma runs" in stderr and "Traceback" not in stderr
    [run] = runs.list_runs()
    assert run["status"] == "stopped" and f"pragma optimize --resume {run['thread_id']}" in stdout
    with runs.checkpointer() as saver:
        state = compile_app(saver).get_state({"configurable": {"thread_id": run["thread_id"]}})
    assert state.values["problem"]["name"] == "relu" and state.next == ("coder",)  # setup kept, coder pending
