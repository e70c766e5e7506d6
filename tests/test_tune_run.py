"""The tuner for real (issue 32): a sweep on a small kernel through the sandbox, g++ and the
verifier's gate; and the CLI SIGKILLed in the middle of a sweep, resumed by a new process, times
none of the variants it had finished again and repeats no LLM request.

Real parts: sandboxed builds and verifications, g++, the SQLite checkpointer, the CLI, SIGKILL;
the only fake is the LLM (tests/scripted.py), which writes one tunable kernel
(tests/data/candidates/relu_tunable.py: PASSES = 16, tune: 1 4 16; fewer passes are faster).
"""

from __future__ import annotations

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
from langgraph.checkpoint.memory import InMemorySaver

from pragma.graph.builder import compile_app
from pragma.graph.context import resolve_context
from pragma.tools import tunables

pytestmark = pytest.mark.integration

CLI = str(Path(__file__).parent / "scripted_cli.py")


def tunable_script() -> dict:
    return {"coder": {"1": scripted.code_reply("relu_tunable.py")}, "conductor": {}}


def _sweep_context(**kw):
    # A budget the whole sweep fits (a variant takes 5-20 s under load): every dimension is searched.
    return resolve_context(
        coder_model="scripted:coder",
        max_iterations=1,
        profile_simulate="never",
        kernel_memory=False,
        tune_budget_s=600,
        **kw,
    )


def test_a_real_sweep_finds_the_faster_value_and_the_gate_accepts_it(isolated_data_dir, monkeypatch):
    monkeypatch.setattr("pragma.nodes.llm.load_chat_model", scripted.loader_for(tunable_script()))
    ctx = _sweep_context()
    app = compile_app(InMemorySaver())
    config = {"configurable": {"thread_id": "sweep"}}
    steps = []
    for chunk in app.stream({"problem": {"path": str(FLOW_RELU)}}, config, context=ctx, stream_mode="updates"):
        steps += list(chunk)
    state = app.get_state(config).values

    # verifier -> tune (one step per build, variant and the gate) -> profiler; no LLM call but the Coder's
    assert steps[:3] == ["setup", "coder", "verifier"] and steps[-1] == "profiler"
    assert set(steps[3:-1]) == {"tune"} and len(steps[3:-1]) >= 4
    assert state["usage"]["llm_calls"] == 1
    [record] = state["sweeps"]
    timed = [(t["dim"], t["value"]) for t in record["trials"]]
    # PASSES walks down from its default 16 (nothing above it): 4 then 1, each an improvement
    assert timed[:2] == [("PASSES", "4"), ("PASSES", "1")], timed
    assert all(t["status"] == "ok" for t in record["trials"]), record["trials"]
    assert record["trials"][0]["improved"] and record["trials"][1]["improved"]
    # then the build knobs at PASSES=1, each value built (in parallel) and timed once
    knobs = {d["name"]: d["values"] for d in record["dims"] if d["kind"] == "build"}
    assert sorted((d, v) for d, v in timed if d.startswith("build:")) == sorted(
        (d, v) for d, values in knobs.items() for v in values[1:]
    )
    assert all(t["vs_point"] > 0 for t in record["trials"])  # each timed head to head with the best point
    assert record["winner"]["PASSES"] == "1" and record["trials"][1]["vs_point"] > 1.5

    # the winner went through the same gate as any candidate: against the candidate it came from
    tuned = [a for a in state["attempts"] if a["origin"] == "tune"]
    assert len(tuned) == 1 and tuned[0]["parent"] == 1 and tuned[0]["params"]["PASSES"] == "1"
    assert tuned[0]["iteration"] == 2 and state["iteration"] == 2
    assert "95% CI of the speedup over the best" in tuned[0]["message"] or "accepted" in record["gate"]
    assert record["accepted"] == tuned[0]["is_new_best"]
    if record["accepted"]:  # 16 passes against 1: accepted on any machine we know, but noise decides
        assert state["best"]["iteration"] == 2 and "PASSES = 1;" in state["best"]["code"]
        assert state["best"]["profile"]["iteration"] == 2  # the profiler crowned it, profile attached
    assert tunables.parse(state["best"]["code"])[0].name == "PASSES"


def test_a_real_sweep_tries_streaming_stores_on_a_plain_loop_and_verifies_them(isolated_data_dir, monkeypatch):
    # The rewrite the embedded model was told and did not write (tune_rewrites: on for it by default),
    # made by the tuner: built, verified and timed like any variant, the arithmetic unchanged.
    from pragma.nodes import tune

    reply = scripted.code_reply("relu_fast.py")  # a plain `#pragma omp parallel for simd` loop
    monkeypatch.setattr("pragma.nodes.llm.load_chat_model", scripted.loader_for({"coder": {"1": reply}}))
    ctx = _sweep_context(tune_rewrites="on")
    app = compile_app(InMemorySaver())
    config = {"configurable": {"thread_id": "stream"}}
    app.invoke({"problem": {"path": str(FLOW_RELU)}}, config, context=ctx)
    state = app.get_state(config).values
    [record] = state["sweeps"]
    assert record["dims"][0]["name"] == tune.STREAMING
    [trial] = [t for t in record["trials"] if t["dim"] == tune.STREAMING]
    assert trial["value"] == "on" and trial["status"] == "ok", trial  # correct on every check, timed
    assert state["usage"]["llm_calls"] == 1
    if record["winner"].get(tune.STREAMING) == "on" and record["accepted"]:
        assert "_mm256_stream_ps" in state["best"]["code"]


def _timed_line(line: str) -> bool:
    """A progress line of one timed variant: '  tune: NR=32: 0.71x (1.05x the best point) in 9.1 s, better'."""
    return line.startswith("  tune: ") and line.rstrip().endswith("better")


def _run(args: list[str], env: dict, script: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, CLI, str(script), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kw,
    )


def _state(data_dir: Path, thread_id: str) -> dict:
    code = (
        "import json; from pragma.graph import runs; from pragma.graph.builder import compile_app\n"
        "with runs.checkpointer() as s:\n"
        f"    st = compile_app(s).get_state({{'configurable': {{'thread_id': {thread_id!r}}}}})\n"
        "print(json.dumps({'values': st.values, 'next': list(st.next)}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=pragma_env(data_dir), capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout)


def test_sigkill_mid_sweep_resumes_without_timing_finished_variants_again(tmp_path, isolated_data_dir):
    script = write_script(tmp_path, tunable_script())
    log = tmp_path / "llm.jsonl"
    env = pragma_env(isolated_data_dir, PRAGMA_TEST_LLM_LOG=str(log))
    args = ["optimize", str(FLOW_RELU), "--coder-model", "scripted:coder", "--max-iterations", "1"]
    args += ["--set", "profile_simulate=never", "--set", "tune_budget_s=600", "--out", str(tmp_path / "out")]
    proc = _run(args, env, script)
    lines: list[str] = []
    deadline = time.monotonic() + 400
    # Kill once the CLI has reported two timed variants: the sweep is under way, not finished.
    while sum(1 for ln in lines if _timed_line(ln)) < 2:
        line = proc.stdout.readline()
        assert line or proc.poll() is None, "the run ended before its sweep:\n" + "".join(lines)
        assert time.monotonic() < deadline, "never reached the sweep:\n" + "".join(lines)
        lines.append(line)
    os.killpg(proc.pid, signal.SIGKILL)
    lines.append(proc.communicate(timeout=60)[0])
    output = "".join(lines)
    thread_id = next(ln.split()[1] for ln in output.splitlines() if ln.startswith("run ") and "resume with" in ln)

    killed = _state(isolated_data_dir, thread_id)
    # Killed mid-sweep. Either the last checkpoint waits on the next tune step, or the kill fell
    # between a tune step's saved writes and its successor checkpoint: LangGraph then lists no next
    # task (the step has its writes) and the resume applies them without running the step again
    # (seen 1 run in 4 under load). Either way the committed sweep is under way, not done.
    assert killed["next"] in (["tune"], []), (killed["next"], output[-4000:])
    finished = killed["values"]["sweep"]["trials"]
    assert len(finished) >= 1 and not killed["values"]["sweep"]["done"]
    calls_before = log.read_text().splitlines()

    resumed = subprocess.run(
        [sys.executable, CLI, str(script), "optimize", "--resume", thread_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert log.read_text().splitlines() == calls_before  # no LLM request repeated (nor any new one)
    state = _state(isolated_data_dir, thread_id)["values"]
    [record] = state["sweeps"]
    # The finished variants are the killed run's own measurements (a re-timing would differ), and
    # no variant was timed twice.
    assert record["trials"][: len(finished)] == [{**t, "message": t.get("message", "")} for t in finished]
    counts = Counter((t["dim"], t["value"]) for t in record["trials"])
    assert all(n == 1 for n in counts.values()), counts
    assert record["winner"]["PASSES"] == "1"
    assert [a["origin"] for a in state["attempts"]] == ["initial", "tune"]
    # A variant line the resumed run prints again is the killed run's line to the character (LangGraph
    # re-emits a finished step's saved writes when its successor checkpoint was not yet written):
    # the same figures, not a new measurement.
    before = {ln.split(":", 2)[1].strip(): ln for ln in output.splitlines() if _timed_line(ln)}
    for ln in resumed.stdout.splitlines():
        if _timed_line(ln) and (key := ln.split(":", 2)[1].strip()) in before:
            assert ln == before[key], (ln, before[key])
