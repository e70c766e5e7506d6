"""What a candidate can reach from inside its runner, probed with raw libc calls through ctypes
(the static rules are off: this is the runtime fences alone).

Each probe prints what it got; the test asserts on the printed lines and on the machine afterwards.
Where a layer is missing on this machine (no namespaces, no Landlock) the test skips with the
sandbox's own "none: ..." reason.
"""

import os
import socket
import threading
from pathlib import Path

import pytest
from conftest import CANDIDATES, EXAMPLES

from pragma.graph.context import resolve_context
from pragma.tools.verify import verify_candidate

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

RELU = str(EXAMPLES / "relu.py")
RELU_FAST = (CANDIDATES / "relu_fast.py").read_text()
QUICK = {"timed_calls": 5, "warmup_calls": 1, "warmup_s": 0.0, "correctness_trials": 1, "static_checks": False}
MARKER = "sk-pragma-isolation-marker-4711"


def _probe_source(tag: str, port: int) -> str:
    return f'''
import ctypes, os, socket
_libc = ctypes.CDLL(None, use_errno=True)
_fd = _libc.open(b"/tmp/pragma-v2-open-{tag}", 0o101, 0o644)  # O_WRONLY | O_CREAT
print("LIBC_OPEN", _fd, ctypes.get_errno(), flush=True)
print("LIBC_SYSTEM", _libc.system(b"echo x > /tmp/pragma-v2-system-{tag}"), flush=True)
_s = socket.socket()
_s.settimeout(2)
try:
    _s.connect(("127.0.0.1", {port}))
    print("NET reachable", flush=True)
except OSError as exc:
    print("NET blocked", exc.errno, flush=True)
_hits, _pids = [], [p for p in os.listdir("/proc") if p.isdigit()]
for _p in _pids:
    for _what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{{_p}}/{{_what}}", "rb") as _f:
                if b"{MARKER}" in _f.read():
                    _hits.append((_p, _what))
        except OSError:
            pass
print("PROC_HITS", _hits, "PROCS", len(_pids), flush=True)
for _what in ("mem", "environ"):
    try:
        with open(f"/proc/{{os.getppid()}}/{{_what}}", "rb") as _f:
            _f.read(16)
        print("PARENT", _what, "readable", flush=True)
    except OSError as exc:
        print("PARENT", _what, "denied", exc.errno, flush=True)
with open("/proc/self/status") as _f:
    print([ln.strip() for ln in _f if ln.startswith("CapEff")][0].replace(chr(9), " "), flush=True)
'''


def test_libc_calls_through_ctypes_are_contained(isolated_data_dir, monkeypatch):
    monkeypatch.setenv("PRAGMA_LLM_API_KEY", MARKER)  # in the launcher's environment, as in a real run
    tag = f"{os.getpid()}-{threading.get_ident()}"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        result = verify_candidate(RELU, _probe_source(tag, port) + RELU_FAST, resolve_context(**QUICK))
    finally:
        server.close()
    box, log = result["sandbox"], result["log_tail"]
    assert result["status"] == "ok", (result["message"], log[-2000:])
    assert MARKER not in log and MARKER not in str(result)
    if box["filesystem"].startswith("none"):
        pytest.skip(f"no Landlock here: {box['filesystem']}")
    assert not Path(f"/tmp/pragma-v2-open-{tag}").exists() and "LIBC_OPEN -1" in log
    assert not Path(f"/tmp/pragma-v2-system-{tag}").exists()
    assert "NET blocked" in log
    assert "PROC_HITS [] " in log, log[-2000:]
    # The judge is not dumpable and in an outer Landlock domain: its memory and environment are closed.
    assert "PARENT mem denied" in log and "PARENT environ denied" in log, log[-2000:]
    if os.geteuid() == 0:
        assert "CapEff: 0000000000000000" in log, log[-2000:]
    if box.get("proc", "").startswith("fresh"):
        procs = int(log.split("PROCS", 1)[1].split()[0])
        assert procs < 12, f"{procs} processes visible from the sandbox"  # init, judge, runners, the shell


def test_isolation_layers_are_listed(isolated_data_dir):
    result = verify_candidate(RELU, RELU_FAST, resolve_context(**{**QUICK, "static_checks": True}))
    assert result["status"] == "ok", result["message"]
    box = result["sandbox"]
    assert {"environment", "limits", "network", "processes", "filesystem", "proc", "judge", "runners"} <= set(box)
    assert "UNCONFINED" not in result["message"] or all(box[k].startswith("none") for k in ("network", "filesystem"))
