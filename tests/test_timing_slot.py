"""The machine's timing slot: exclusive across processes, re-entrant within one, freed by the
kernel when its holder dies (a SIGKILLed eval job must not block the next one)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from pragma.tools import timing_slot

pytestmark = [pytest.mark.integration, pytest.mark.timing]  # starts sandboxes/processes (tests/conftest.py)

HOLDER = """
import sys, time
from pragma.tools import timing_slot
with timing_slot.hold("test", lock_path=sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _start_holder(lock: str, hold_s: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, lock, str(hold_s)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_process_waits_for_the_holder(tmp_path):
    lock = str(tmp_path / "slot.lock")
    proc = _start_holder(lock, 0.6)
    try:
        with timing_slot.hold("waiter", lock_path=lock) as use:
            assert use["waited_s"] >= 0.3, use  # it could not start while the other process held it
            assert not use["nested"]
    finally:
        proc.wait(timeout=10)


def test_killed_holder_releases_the_slot_at_once(tmp_path):
    lock = str(tmp_path / "slot.lock")
    proc = _start_holder(lock, 300)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    t0 = time.monotonic()
    with timing_slot.hold("after kill", lock_path=lock) as use:
        assert use["waited_s"] < 1.0
    assert time.monotonic() - t0 < 2.0


def test_nested_hold_in_one_process_does_not_deadlock(tmp_path):
    lock = str(tmp_path / "slot.lock")
    with timing_slot.hold("outer", lock_path=lock), timing_slot.hold("inner", lock_path=lock) as inner:
        assert inner["nested"] and inner["waited_s"] == 0.0
    # released afterwards: another process gets it without waiting
    proc = _start_holder(lock, 0.0)
    proc.wait(timeout=10)
