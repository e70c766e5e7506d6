"""Issue 33, fair neighbours: what the runner's seccomp filter refuses and allows, and the judge's
/proc readings behind fair_scheduling, reaped children's CPU and the per-call CPU clock.

Each filter test installs tools/launch/seccomp.py's real filter in a fresh interpreter (a filter cannot be
removed) and reports back on stdout; the judge's helpers read real processes' /proc entries.
The red-team cases that use them through the installed CLI are in tests/data/adversarial/
(renice_neighbours, clone_second_core, helper_thread_share).
"""

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from test_redteam_twins import twin_cases

from pragma.tools.judging import judge
from pragma.tools.launch import seccomp

pytestmark = pytest.mark.integration  # forks processes (tests/conftest.py)

_SYS_CLONE3 = 435  # the same number on x86-64 and aarch64


TESTS = os.path.dirname(os.path.abspath(__file__))


def _in_filtered_child(probe: str, *args: int) -> dict:
    """Run the module-level ``probe(*args) -> dict`` in a fresh interpreter under
    ``seccomp.confine_runner``; its answer. A fresh process, not a fork of this one: a fork of a
    multi-threaded pytest worker hung once in CI (900 s timeout), and a runner is single-threaded
    when its filter goes on, as here (the filter is installed before anything else is imported)."""
    if platform.machine() not in seccomp._ARCH:
        pytest.skip(f"no runner filter for {platform.machine()}")
    code = (
        "import json, sys\n"
        "from pragma.tools.launch import seccomp\n"
        "applied = seccomp.confine_runner()\n"
        f"sys.path.insert(0, {TESTS!r})\n"
        "import test_fair_neighbours as t\n"
        "out = {'applied': applied}\n"
        f"out.update({{}} if applied.startswith('none') else getattr(t, {probe!r})(*{args!r}))\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["applied"].startswith("none"):
        pytest.skip(out["applied"])
    return out


def _errno(fn) -> int:
    try:
        fn()
        return 0
    except OSError as exc:
        return exc.errno


@pytest.fixture
def neighbour():
    """A sleeping process of the same uid: what a runner's neighbour is to it."""
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    yield pid
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _probe_neighbour(neighbour: int) -> dict:
    return {
        "nice": _errno(lambda: os.setpriority(os.PRIO_PROCESS, neighbour, 19)),
        "user": _errno(lambda: os.setpriority(os.PRIO_USER, 0, 19)),
        "group": _errno(lambda: os.setpriority(os.PRIO_PGRP, 0, 19)),
        "idle": _errno(lambda: os.sched_setscheduler(neighbour, os.SCHED_IDLE, os.sched_param(0))),
        "param": _errno(lambda: os.sched_setparam(neighbour, os.sched_param(0))),
        "move": _errno(lambda: os.sched_setaffinity(neighbour, {0})),
        "signal": _errno(lambda: os.kill(neighbour, signal.SIGSTOP)),
        "pidfd": _errno(lambda: os.pidfd_open(neighbour)),
    }


def test_the_filter_refuses_every_scheduling_request_aimed_at_a_neighbour(neighbour):
    out = _in_filtered_child("_probe_neighbour", neighbour)
    refused = {k: v for k, v in out.items() if k != "applied"}
    assert refused == dict.fromkeys(refused, 1), refused  # all EPERM
    assert judge.sched_of(neighbour)[:2] == judge.sched_of(os.getpid())[:2]  # nothing changed


def _probe_own() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    clone3 = libc.syscall(_SYS_CLONE3, None, 0)
    clone3_errno = ctypes.get_errno()
    done = []
    t = threading.Thread(target=lambda: done.append(1))  # threads fall back from clone3 to clone
    t.start()
    t.join()
    child = os.fork()
    if child == 0:
        os._exit(7)
    _, status = os.waitpid(child, 0)
    return {
        "own_cores": _errno(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
        "own_nice": _errno(lambda: os.setpriority(os.PRIO_PROCESS, 0, 1)),
        "own_signal": _errno(lambda: os.kill(os.getpid(), 0)),
        "own_limits": _errno(lambda: __import__("resource").prlimit(0, __import__("resource").RLIMIT_CORE)),
        "clone3": [clone3, clone3_errno],
        "thread": done == [1],
        "fork": os.WEXITSTATUS(status),
        "compiler": subprocess.run(["true"]).returncode,  # the candidate's build runs the compiler
    }


def test_the_filter_fixes_the_runners_own_cores_and_lets_it_run_what_it_needs():
    out = _in_filtered_child("_probe_own")
    assert out["own_cores"] == 1  # EPERM even for its own set: a helper cannot leave the pinned cores
    assert out["own_nice"] == out["own_signal"] == out["own_limits"] == 0
    assert out["clone3"] == [-1, 38]  # ENOSYS
    assert out["thread"] and out["fork"] == 7 and out["compiler"] == 0


def _judge_with(runners: dict[str, int]) -> judge.Judge:
    """A Judge with just what _check_scheduling reads: runners' pids and what they must keep."""
    j = judge.Judge.__new__(judge.Judge)
    j.v = judge.Verdicts()
    j.runners = {role: SimpleNamespace(pid=pid) for role, pid in runners.items()}
    j.sched_expected = {pid: judge.sched_of(pid) for pid in [os.getpid(), *runners.values()]}
    return j


def test_a_reniced_runner_is_a_fair_scheduling_rejection(neighbour):
    j = _judge_with({"reference": neighbour})
    j._check_scheduling("before the timed rounds")  # unchanged: passes
    os.setpriority(os.PRIO_PROCESS, neighbour, 19)  # what the filter now refuses a candidate
    with pytest.raises(judge.Decided) as caught:
        j._check_scheduling("after the timed rounds")
    assert "rule fair_scheduling: after the timed rounds: the reference runner" in caught.value.result["message"]
    assert "nice 19" in caught.value.result["message"]


def test_a_moved_runner_thread_is_a_fair_scheduling_rejection(neighbour):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("one core: nowhere to move a runner to")
    j = _judge_with({"candidate": neighbour})
    os.sched_setaffinity(neighbour, cores[:1])
    with pytest.raises(judge.Decided) as caught:
        j._check_scheduling("after the timed rounds")
    assert f"cores {cores[:1]}" in caught.value.result["message"]


def test_reaped_childrens_cpu_counts_and_the_process_clock_is_exact_while_stopped():
    pid = os.fork()
    if pid == 0:  # a "runner" that reaps a child which burned ~0.3 s of CPU
        kid = os.fork()
        if kid == 0:
            end = time.process_time() + 0.3
            while time.process_time() < end:
                pass
            os._exit(0)
        os.waitpid(kid, 0)
        os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(0)
    try:
        os.waitpid(pid, os.WUNTRACED)
        assert judge.child_ticks(pid) >= 0.25 * judge._CLK_TCK  # in cutime/cstime
        assert judge.cpu_ticks(pid) >= judge.child_ticks(pid)  # counted as the process's CPU
        first = judge.cpu_clock_ns(pid)
        time.sleep(0.05)
        assert first is not None and judge.cpu_clock_ns(pid) == first  # stopped: nothing pending
        assert first < 0.2e9  # the process clock holds its own threads only, not the child's
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_every_class_of_issue_33s_fair_neighbours_has_a_case():
    twins = {p.values[0].stem for p in twin_cases()}
    assert {"clone_second_core", "helper_thread_share"} <= twins
    from test_verifier_redteam import ADVERSARIAL, _field

    assert _field((ADVERSARIAL / "renice_neighbours.py").read_text(), "expect") == "ok"
