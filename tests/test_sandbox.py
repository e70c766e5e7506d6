"""The sandbox with real candidates: signals, secrets, network, the held-out seed, reported isolation.

Where the machine lacks a facility (namespaces, Landlock) the result says "none: ..." and the
test that needs it skips with that reason.
"""

import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from conftest import CANDIDATES, EXAMPLES

from pragma.graph.context import resolve_context
from pragma.tools.launch import sandbox
from pragma.tools.verify import verify_candidate

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

RELU = str(EXAMPLES / "relu.py")
QUICK = {"timed_calls": 5, "warmup_calls": 1, "warmup_s": 0.0, "correctness_trials": 1}
RELU_FAST = (CANDIDATES / "relu_fast.py").read_text()


def quick(**extra):
    return resolve_context(**{**QUICK, **extra})


def test_isolation_is_reported_layer_by_layer(isolated_data_dir):
    result = verify_candidate(RELU, RELU_FAST, quick())
    assert result["status"] == "ok", result["message"]
    box = result["sandbox"]
    assert {"environment", "limits", "network", "processes", "filesystem"} <= set(box)
    assert "address space" in box["limits"] and "file size" in box["limits"]
    for layer in ("network", "filesystem"):
        assert box[layer]  # either what applied, or "none: why"


def test_abort_in_the_kernel_is_a_result_naming_the_signal(isolated_data_dir):
    code = RELU_FAST.replace("#include <cstdint>", "#include <cstdint>\n#include <cstdlib>").replace(
        "#pragma omp parallel for simd schedule(static)", "std::abort();"
    )
    result = verify_candidate(RELU, code, quick())
    assert result["status"] == "runtime_error"
    assert "SIGABRT" in result["message"], result["message"]


def test_secrets_and_the_request_never_reach_the_candidate(isolated_data_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-pragma-test-secret")
    monkeypatch.setenv("PRAGMA_LLM_API_KEY", "sk-pragma-test-secret")
    spy = (
        "import os\nprint('ENV', sorted(os.environ), any('secret' in v for v in os.environ.values()))\n"
        "print('REQUEST_VISIBLE', os.path.exists('request.json'))\n"
    )
    result = verify_candidate(RELU, spy + RELU_FAST, quick())
    assert result["status"] == "ok", result["message"]
    assert "sk-pragma-test-secret" not in result["log_tail"] and "OPENAI_API_KEY" not in result["log_tail"]
    assert "REQUEST_VISIBLE False" in result["log_tail"]
    assert "ENV [" in result["log_tail"] and "] False" in result["log_tail"]


def test_no_seed_leaves_the_judge(isolated_data_dir, monkeypatch):
    """Every input seed is drawn by the judge after it forked the runners: none is in the request,
    and the result names none (the fixed Context seed is no longer used for inputs)."""
    seen = {}
    real = sandbox.run_worker

    def recording_run_worker(request, **kwargs):  # a spy: the real sandbox still runs
        seen.update(request)
        return real(request, **kwargs)

    monkeypatch.setattr(sandbox, "run_worker", recording_run_worker)
    result = verify_candidate(RELU, RELU_FAST, quick())
    assert result["status"] == "ok" and result["holdout_ok"]
    assert not any("seed" in key and key != "seed" for key in seen), sorted(seen)
    assert "holdout_seed" not in json.dumps(result)


def test_the_network_is_out_of_reach(isolated_data_dir):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted = []

    def accept_once():
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    probe = (
        f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "    print('NETWORK reachable')\nexcept OSError as exc:\n    print('NETWORK blocked', exc)\n"
    )
    waiter = threading.Thread(target=accept_once)
    waiter.start()
    result = verify_candidate(RELU, probe + RELU_FAST, quick(static_checks=False))
    waiter.join()
    server.close()
    box = result["sandbox"]
    if box["network"].startswith("none") and "TCP denied" not in box["filesystem"]:
        pytest.skip(f"no network isolation here: {box['network']}")
    assert result["status"] == "ok", result["message"]
    assert "NETWORK blocked" in result["log_tail"] and not accepted


def test_processes_started_by_the_candidate_do_not_outlive_it(isolated_data_dir):
    # A grandchild in its own session escapes killpg; the PID namespace (or the token sweep) must not.
    marker = f"sleep 4243.{os.getpid()}"
    escape = (
        f"import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', {marker.split()!r})\n    os._exit(0)\n"
    )
    result = verify_candidate(RELU, escape + RELU_FAST, quick(static_checks=False))
    assert result["status"] in ("ok", "rejected"), result["message"]
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == marker]
    assert leftovers == [], f"left behind: {leftovers}"


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_the_zygote_does_not_wake_while_a_verification_runs():
    """The zygote shares the judge's PID namespace, where any process but the judge and the runners
    counts as a noisy neighbour during timing. It used to poll for its job every 50 ms: 30-90 ms of
    CPU per timed verification under load, and honest kernels were rejected (noisy_neighbour: '2
    (python) 40 ms'). Now it blocks until the job exits or the launcher writes: a handful of context
    switches over a 2 s job, and it still returns as soon as the job ends."""
    script = (
        "import os, sys, time\n"
        "from pragma.tools.launch import zygote\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(2.0)\n"
        "    os._exit(7)\n"
        "def switches():\n"
        "    with open('/proc/self/status') as f:\n"
        "        return int(next(ln.split()[1] for ln in f if ln.startswith('voluntary_ctxt_switches')))\n"
        "s0, t0 = switches(), time.monotonic()\n"
        "status = zygote._wait_or_kill(pid)\n"
        "print(switches() - s0, round(time.monotonic() - t0, 2), os.waitstatus_to_exitcode(status))\n"
    )
    # stdin stays open, as the launcher's pipe does (its end means "the launcher is gone").
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.read()
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    woke, waited_s, code = out.split()
    assert code == "7" and 1.9 <= float(waited_s) < 2.5
    assert int(woke) < 10, f"the zygote woke {woke} times while its job ran"


# Run in a child started with the sandbox's environment, as every runner is: four 16 MB tensors
# (the rms_norm reference's temporaries) allocated and freed, then the resident set compared. With
# glibc's defaults such blocks are mapped and unmapped per call (fresh page faults at each call,
# or not, depending on the order of earlier frees: a reference read 4.4-5.9 ms in one process and
# 20.9-28.1 ms in the next); with the kept heap they stay resident, so the next call reuses them.
_HEAP_PROBE = """
import ctypes, json, sys
import torch
from pragma.tools.launch import spawn
if sys.argv[1] == "kept":
    spawn.steady_heap(ctypes.CDLL(None))

def rss_kib(key):
    return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1])

def huge_kib():
    return int(next(l for l in open("/proc/self/smaps_rollup") if l.startswith("AnonHugePages")).split()[1])

before = rss_kib("RssAnon:")
temps = [torch.ones(2047, 2049) for _ in range(4)]
huge = huge_kib()
del temps
print(json.dumps({"kept_kib": rss_kib("RssAnon:") - before, "huge_kib": huge}))
"""


@pytest.mark.parametrize("policy", ["kept", "glibc"])
def test_runners_keep_their_heap_on_huge_pages(tmp_path, policy):
    env = sandbox.sandbox_env(tmp_path, 1)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", _HEAP_PROBE, policy], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    sixty_four_mib_kib = 4 * 2047 * 2049 * 4 // 1024
    if policy == "kept":
        assert got["kept_kib"] >= 0.9 * sixty_four_mib_kib, got  # freed, still resident: no faults next call
    else:
        assert got["kept_kib"] < 0.1 * sixty_four_mib_kib, got  # the control: glibc unmapped them
    thp = (
        open("/sys/kernel/mm/transparent_hugepage/enabled").read()
        if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled")
        else "[never]"
    )
    if "[never]" not in thp:
        assert got["huge_kib"] >= 32 * 1024, got  # THP_MEM_ALLOC_ENABLE from sandbox_env took effect


def test_builds_outside_a_verification_run_at_the_lowest_priority(isolated_data_dir, tmp_path, monkeypatch):
    """The tuner's parallel prebuilds must not share a timed core at equal weight (sandbox.BUILD_NICE):
    a real build worker's process runs at nice 19; a verification's judge at the launcher's own."""
    from pragma.tools.verify import prebuild_kernel

    seen = tmp_path / "priorities"
    real = sandbox._limits

    def recording(*args):  # runs in the child between fork and exec, after the real limits
        real(*args)
        with open(seen, "a") as f:
            f.write(f"{os.getpriority(os.PRIO_PROCESS, 0)}\n")

    monkeypatch.setattr(sandbox, "_limits", recording)
    cpp = '#include <cstdint>\nextern "C" void k(float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 0.f; }\n'
    ctx = resolve_context()
    assert prebuild_kernel(str(EXAMPLES / "relu.py"), cpp, "nice_probe", ctx) == "ok"
    assert seen.read_text().split() == [str(sandbox.BUILD_NICE)]
    result = verify_candidate(str(EXAMPLES / "relu.py"), (CANDIDATES / "relu_fast.py").read_text(), ctx)
    assert result["status"] == "ok", result["message"]
    assert seen.read_text().split()[1:] in ([], [str(os.getpriority(os.PRIO_PROCESS, 0))])
