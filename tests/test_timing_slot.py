"""The machine's timing slot: exclusive across processes, re-entrant within one, freed by the
kernel when its holder dies (a SIGKILLed eval job must not block the next one). Shared holders
(the verifier's checks) run beside each other, never beside an exclusive one, and a waiting
exclusive holder goes before shared holders that came after it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from pragma.tools.launch import timing_slot

pytestmark = [pytest.mark.integration, pytest.mark.timing]  # starts sandboxes/processes (tests/conftest.py)

HOLDER = """
import sys, time
from pragma.tools.launch import timing_slot
mode = sys.argv[3] if len(sys.argv) > 3 else "hold"
print("asking", flush=True)
with getattr(timing_slot, mode)("test", lock_path=sys.argv[1]):
    print("held", time.monotonic(), flush=True)
    time.sleep(float(sys.argv[2]))
    print("releasing", time.monotonic(), flush=True)  # still held: later holders get it after this
"""


def _spawn(lock: str, hold_s: float, mode: str = "hold") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, lock, str(hold_s), mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "asking"
    return proc


def _start_holder(lock: str, hold_s: float, mode: str = "hold") -> subprocess.Popen:
    proc = _spawn(lock, hold_s, mode)
    assert proc.stdout.readline().split()[0] == "held"
    return proc


def _times(proc: subprocess.Popen) -> tuple[float, float]:
    """(got it, about to release it) on the monotonic clock, read from the holder's output once it ended."""
    out = proc.communicate(timeout=30)[0].split()
    return float(out[out.index("held") + 1]), float(out[out.index("releasing") + 1])


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


def test_shared_holders_run_side_by_side(tmp_path):
    lock = str(tmp_path / "slot.lock")
    proc = _start_holder(lock, 2.0, "share")
    try:
        with timing_slot.share("second", lock_path=lock) as use:
            assert use["waited_s"] < 1.0, use  # checks of two jobs never wait for each other
    finally:
        proc.wait(timeout=10)


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [("share", "hold"), ("hold", "share")],
    ids=["no timed round beside another job's checks", "no checks beside another job's timed rounds"],
)
def test_exclusive_and_shared_wait_for_each_other(tmp_path, theirs, ours):
    lock = str(tmp_path / "slot.lock")
    other = _start_holder(lock, 0.8, theirs)
    try:
        with getattr(timing_slot, ours)("test", lock_path=lock) as use:
            assert use["waited_s"] >= 0.4, use
    finally:
        other.wait(timeout=10)


def test_waiting_exclusive_holder_goes_before_later_shared_ones(tmp_path):
    """Without the turnstile a stream of overlapping checks would keep a timing job waiting forever."""
    lock = str(tmp_path / "slot.lock")
    first = _start_holder(lock, 1.5, "share")
    timer = _spawn(lock, 0.5, "hold")
    time.sleep(0.5)  # the timer is now waiting for the first checker
    late = _spawn(lock, 0.1, "share")  # it could share with the first at once, but the timer waits
    timer_got, timer_released = _times(timer)
    late_got, _ = _times(late)
    first.wait(timeout=10)
    assert late_got >= timer_released, (late_got, timer_got, timer_released)


def test_hold_inside_share_trades_the_shared_lock_for_the_exclusive_one(tmp_path):
    """The verifier's timed rounds inside its checks: another job's checks are kept out while it
    times, and let in again after (no deadlock with a second checker waiting to time too)."""
    lock = str(tmp_path / "slot.lock")
    with timing_slot.share("checks", lock_path=lock):
        other = _start_holder(lock, 0.0, "share")  # shares beside us at once
        other.wait(timeout=10)
        with timing_slot.hold("timing", lock_path=lock) as use:
            assert not use["nested"]
            blocked = _spawn(lock, 0.0, "share")
            time.sleep(0.6)
            assert blocked.poll() is None  # still waiting: we time now
        got, _ = _times(blocked)  # gets in once we are back to sharing
        assert got > 0
        with timing_slot.share("nested", lock_path=lock) as inner:
            assert inner["nested"]
    proc = _start_holder(lock, 0.0, "hold")  # everything released afterwards
    proc.wait(timeout=10)
