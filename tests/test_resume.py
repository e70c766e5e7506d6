"""Interrupted runs resume by thread id in a new process, without repeating finished LLM calls."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import scripted
from conftest import FLOW_RELU, pragma_env, write_script

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

CLI = str(Path(__file__).parent / "scripted_cli.py")


def run_cli(script: Path, args: list[str], env: dict[str, str], timeout_s: float = 600):
    return subprocess.run(
        [sys.executable, CLI, str(script), *args], env=env, capture_output=True, text=True, timeout=timeout_s
    )


def thread_id_of(output: str) -> str:
    for line in output.splitlines():
        if line.startswith("run ") and "resume with" in line:
            return line.split()[1]
    raise AssertionError(f"no thread id in output:\n{output}")


def calls(log: Path) -> list[tuple[str, int]]:
    return [(e["role"], e["attempt"]) for e in map(json.loads, log.read_text().splitlines())]


def final_state(data_dir: Path, thread_id: str) -> dict:
    code = (
        "import json,sys; from pragma.graph import runs; from pragma.graph.builder import compile_app\n"
        "with runs.checkpointer() as s:\n"
        f"    st = compile_app(s).get_state({{'configurable': {{'thread_id': {thread_id!r}}}}})\n"
        "print(json.dumps({'values': st.values, 'next': list(st.next)}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=pragma_env(data_dir), capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(proc.stdout)


def assert_no_repeats(log: Path, raised_once: tuple[str, int] | None = None) -> None:
    counts = Counter(calls(log))
    if raised_once:
        # The call that raised never finished, so exactly that one runs again.
        counts[raised_once] -= 1
    assert all(n == 1 for n in counts.values()), counts


def test_resume_after_exception_inside_a_node(tmp_path, isolated_data_dir):
    script = write_script(tmp_path, scripted.relu_script())
    log = tmp_path / "llm.jsonl"
    env = pragma_env(
        isolated_data_dir,
        PRAGMA_TEST_LLM_LOG=str(log),
        PRAGMA_TEST_RAISE_AT="conductor:3",
        PRAGMA_TEST_RAISE_MARKER=str(tmp_path / "raised"),
    )
    args = [
        "optimize",
        str(FLOW_RELU),
        "--coder-model",
        "scripted:coder",
        "--max-iterations",
        "4",
        "--out",
        str(tmp_path / "out"),
    ]
    first = run_cli(script, args, env)
    assert first.returncode != 0 and "scripted failure at conductor:3" in first.stderr
    thread_id = thread_id_of(first.stdout + first.stderr)
    assert final_state(isolated_data_dir, thread_id)["next"] == ["conductor"]
    before = calls(log)
    second = run_cli(script, ["optimize", "--resume", thread_id], env)
    assert second.returncode == 0, second.stderr
    after = calls(log)[len(before) :]
    # The resumed process starts at the conductor: no coder, verifier or repair work is redone.
    assert after[0] == ("conductor", 3) and ("coder", 3) not in after
    # While a model thinks the CLI says so, and reports each reply's size and rate (the embedded
    # model takes minutes per call): one pair of lines per finished call.
    lines = second.stdout.splitlines()
    asked = [ln for ln in lines if "asking the" in ln and "model (attempt" in ln]
    replied = [ln for ln in lines if ": reply after " in ln and "tokens" in ln]
    assert len(asked) == len(after) and len(replied) == len(after), second.stdout
    assert any("tokens/s" in ln for ln in replied), second.stdout
    assert_no_repeats(log, raised_once=("conductor", 3))
    state = final_state(isolated_data_dir, thread_id)["values"]
    assert [a["iteration"] for a in state["attempts"]] == [1, 2, 3, 4]
    assert state["best"]["iteration"] == 4
    assert (tmp_path / "out" / "best.py").exists()


def test_resume_after_sigkill(tmp_path, isolated_data_dir):
    script = write_script(tmp_path, scripted.relu_script())
    log, marker = tmp_path / "llm.jsonl", tmp_path / "hanging"
    env = pragma_env(
        isolated_data_dir,
        PRAGMA_TEST_LLM_LOG=str(log),
        PRAGMA_TEST_HANG_AT="coder:4",
        PRAGMA_TEST_HANG_MARKER=str(marker),
    )
    args = [
        "optimize",
        str(FLOW_RELU),
        "--coder-model",
        "scripted:coder",
        "--max-iterations",
        "4",
        "--out",
        str(tmp_path / "out"),
    ]
    proc = subprocess.Popen(
        [sys.executable, CLI, str(script), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "run ended before reaching coder:4"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    output = proc.communicate(timeout=30)[0]
    thread_id = thread_id_of(output)
    killed_state = final_state(isolated_data_dir, thread_id)
    assert killed_state["next"] == ["coder"] and len(killed_state["values"]["attempts"]) == 3
    env.pop("PRAGMA_TEST_HANG_AT")
    n_before = len(calls(log))
    resumed = run_cli(script, ["optimize", "--resume", thread_id], env)
    assert resumed.returncode == 0, resumed.stderr
    assert calls(log)[n_before:] == [("coder", 4)]  # only the killed call is made again
    listed = run_cli(script, ["runs"], env).stdout
    assert thread_id in listed and "finished" in listed
    assert_no_repeats(log, raised_once=("coder", 4))
    state = final_state(isolated_data_dir, thread_id)["values"]
    assert [a["iteration"] for a in state["attempts"]] == [1, 2, 3, 4]
    assert state["best"]["iteration"] == 4
