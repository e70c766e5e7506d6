"""Issue 11 part 4 across processes: the reference timing of the baselines (in the sandbox) waits
for the machine's timing slot, so it never overlaps another process's timed phase; so does a whole
verification (build, checks and timed rounds), whose trials would otherwise stream their inputs
through the memory another job's timed kernel reads."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import CANDIDATES, EXAMPLES, pragma_env

from pragma.eval import baselines
from pragma.eval.suites import load_suite
from pragma.graph.context import resolve_context
from pragma.tools.verify import verify_candidate

# Not `timing`: each test holds a slot file of its own (another process sleeps holding it) and asserts
# waits from below, which load only lengthens, so they run in make test's parallel pass, where their
# sleeps overlap other work instead of holding up the pass that must run alone.
pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

HOLD_S = 12.0
HOLDER = (
    "import sys, time\nfrom pragma.tools.launch import timing_slot\n"
    "with timing_slot.hold('test'):\n    print('held', flush=True)\n    time.sleep(float(sys.argv[1]))\n"
)


@contextmanager
def _slot_held_elsewhere(slot: Path, data_dir: Path, hold_s: float) -> Iterator[None]:
    """Another process holds the timing slot at ``slot`` for ``hold_s`` seconds from the moment the
    body starts. The caller points PRAGMA_TIMING_SLOT_PATH there before its first sandbox starts
    (a pre-started judge keeps the environment it started with)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(hold_s)],
        stdout=subprocess.PIPE,
        text=True,
        env=pragma_env(data_dir, PRAGMA_TIMING_SLOT_PATH=str(slot)),
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_reference_timing_waits_for_the_timing_slot(tmp_path, isolated_data_dir, monkeypatch):
    slot = tmp_path / "slot.lock"
    monkeypatch.setenv("PRAGMA_TIMING_SLOT_PATH", str(slot))
    [relu] = load_suite(str(EXAMPLES), None, ["relu"])
    with _slot_held_elsewhere(slot, isolated_data_dir, HOLD_S):
        started = time.monotonic()
        result = baselines.reference_timing(relu.path, relu.sha256, resolve_context(timed_calls=5))
        waited = time.monotonic() - started
    assert result["status"] == "ok", result
    assert waited >= HOLD_S - 1.0, f"the timed loop ran while another process held the slot ({waited:.1f} s)"


def test_verification_waits_while_another_process_times(tmp_path, isolated_data_dir, monkeypatch):
    slot = tmp_path / "slot.lock"
    monkeypatch.setenv("PRAGMA_TIMING_SLOT_PATH", str(slot))
    hold_s = 4.0
    problem, code = str(EXAMPLES / "relu.py"), (CANDIDATES / "relu_fast.py").read_text()
    ctx = resolve_context(timed_calls=5)
    # First, untimed: starts this thread's pre-started judge (seconds of import) before the hold.
    assert verify_candidate(problem, code, ctx)["status"] == "ok"
    with _slot_held_elsewhere(slot, isolated_data_dir, hold_s):
        result = verify_candidate(problem, code, ctx)
    assert result["status"] == "ok", result
    # The judge started while the other process timed: its checks waited, its own timed rounds did not.
    assert result["checks_slot_waited_s"] >= hold_s - 1.5, result["checks_slot_waited_s"]
    assert result["timing_slot_waited_s"] < 1.0, result["timing_slot_waited_s"]


def test_a_build_outside_a_verification_waits_while_another_process_times(tmp_path, isolated_data_dir, monkeypatch):
    """The tuner's and the profiler's prebuilds (and a search round's compiles) take the slot shared:
    beside a 2-worker `pragma eval` their g++ ran on the core next to another job's timed rounds."""
    from pragma.tools.verify import prebuild_kernel

    slot = tmp_path / "slot.lock"
    monkeypatch.setenv("PRAGMA_TIMING_SLOT_PATH", str(slot))
    hold_s = 8.0  # a build alone takes 1-3 s here
    cpp = '#include <cstdint>\nextern "C" void k(float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 1.f; }\n'
    with _slot_held_elsewhere(slot, isolated_data_dir, hold_s):
        started = time.monotonic()
        status = prebuild_kernel(str(EXAMPLES / "relu.py"), cpp, "slot_probe", resolve_context())
        waited = time.monotonic() - started
    assert status == "ok"
    assert waited >= hold_s - 1.0, f"the build ran while another process held the slot ({waited:.1f} s)"
