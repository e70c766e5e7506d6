"""Shared fixtures, and the line between unit and integration tests.

A test marked ``integration`` may start processes (sandboxes, g++, the CLI, servers, eval jobs).
Every other test is a unit test: it runs in this process only, and the guard below makes that a
rule rather than a convention: a unit test that starts a process fails with a message naming the
mark. ``make test-fast`` runs the unit tests (``-m "not integration"``); ``make test`` runs all.
"""

import json
import multiprocessing.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
EXAMPLES = ROOT / "eval" / "suites" / "examples"
# The ReLU example at a test size, for tests that exercise the loop rather than the kernel
# (tests/data/flow/relu.py says why).
FLOW_RELU = ROOT / "tests" / "data" / "flow" / "relu.py"
CANDIDATES = Path(__file__).parent / "data" / "candidates"

# The parallel pass (`make test`: xdist workers, no `timing` test): OpenMP threads that finished
# their share sleep at once instead of spinning for the next parallel region. Why: three workers
# share 2 cores, and a system-wide profile of that pass (perf record -a, cpu-clock) put ~10% of all
# CPU in libgomp's spin-wait, mostly torch's threads in the workers themselves (small tensors,
# many regions), CPU the other workers' compiles and sandboxes waited for. Set before torch loads;
# processes the tests start inherit it. The `timing` pass runs without it, as users do.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# Collection imports every test module and what they import (torch, LangGraph, Chroma): as PRAGMA's
# own processes do at start-up, no garbage collection while it runs and what it made frozen after;
# each pytest process runs it, the parallel pass's workers included.
@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    from pragma.tools.launch import startup

    with startup.imports():
        return (yield)


# Short timing keeps the suite fast; measurement precision is the benchmark's business.
FAST_SETTINGS = {
    "PRAGMA_TIMED_CALLS": "10",
    "PRAGMA_WARMUP_CALLS": "2",
    "PRAGMA_WARMUP_S": "0.05",
    "PRAGMA_PROFILE_CALLS": "5",
    # Never start the embedded model by accident (it is installed on dev machines).
    "PRAGMA_LOCAL_MODEL": "off",
    # Graph, resume and CLI tests profile to exercise the flow, not the profiler's tools: the hot-spot
    # sampling (perf record + llvm-mca, ~2.5 s a profile) and the callgrind simulation (30-60 s) are
    # tested, with these settings at their defaults, in tests/test_profiler_real.py.
    "PRAGMA_PROFILE_HOTSPOTS": "false",
    "PRAGMA_PROFILE_SIMULATE": "never",
    # The micro-profile that rebuilds the kernel twice (vector widths, seconds) likewise.
    "PRAGMA_PROFILE_MICRO": "cheap",
}
# The profiler's own tests: every tool at its default.
PROFILER_SETTINGS = {
    k: v
    for k, v in FAST_SETTINGS.items()
    if k not in ("PRAGMA_PROFILE_HOTSPOTS", "PRAGMA_PROFILE_SIMULATE", "PRAGMA_PROFILE_MICRO")
}


@pytest.fixture(scope="session")
def machine_peaks(tmp_path_factory):
    """This machine's measured peaks (tools/hardware.py), measured once per session on first use.

    Why: every test has its own data dir, and each profiling test measured the machine again
    (g++ and a ~4 s benchmark). The peaks are a property of the machine, not of the test; tests of
    the measurement itself call hardware.measure_peaks directly or use a fresh unit-test data dir.
    """
    session_dir = tmp_path_factory.mktemp("machine-peaks")
    measured: list[Path] = []

    def hardware_dir() -> Path:
        if not measured:
            from pragma.tools import hardware

            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("PRAGMA_DATA_DIR", str(session_dir))
                hardware.peaks()
            measured.append(session_dir / "hardware")
        return measured[0]

    return hardware_dir


@pytest.fixture(autouse=True)
def isolated_data_dir(request, tmp_path_factory, monkeypatch):
    """Each test gets its own data dir (checkpoints, registry); builds are shared to save compiles.
    Integration tests find the machine's peaks there already (``machine_peaks``); unit tests start
    with none."""
    data = tmp_path_factory.mktemp("pragma-data")
    if request.node.get_closest_marker("integration") is not None:
        source = request.getfixturevalue("machine_peaks")()
        if source.is_dir():
            shutil.copytree(source, data / "hardware")
    monkeypatch.setenv("PRAGMA_DATA_DIR", str(data))
    for k, v in FAST_SETTINGS.items():
        monkeypatch.setenv(k, v)
    for k in ("PRAGMA_CODER_MODEL", "PRAGMA_CONDUCTOR_MODEL", "PRAGMA_LLM_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    return data


def pragma_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()}
    env.update({"PRAGMA_DATA_DIR": str(data_dir), **FAST_SETTINGS, **extra})  # extra overrides the fast settings
    return env


def write_script(tmp_path: Path, script: dict) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return path


# Every way this code base starts a process: subprocess (run, Popen, check_output), fork
# (multiprocessing's fork start, os.fork), spawn (multiprocessing's spawn/forkserver, posix_spawn).
_PROCESS_STARTERS = [
    (subprocess.Popen, "_execute_child"),
    (os, "fork"),
    (os, "forkpty"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (multiprocessing.util, "spawnv_passfds"),
]


@pytest.fixture(autouse=True)
def unit_tests_start_no_process(request, monkeypatch):
    if request.node.get_closest_marker("integration") is not None:
        return

    def refuse(*args, **kwargs):
        raise RuntimeError(
            f"{request.node.nodeid} starts a process but is not marked integration: mark it "
            "@pytest.mark.integration (or its module with pytestmark), or keep the unit test in-process"
        )

    for owner, name in _PROCESS_STARTERS:
        if hasattr(owner, name):
            monkeypatch.setattr(owner, name, refuse)


def last_level_held_bytes() -> int:
    """What this machine's last cache level holds as its measured peaks say (a VM's measured share of
    the size sysfs reports; tools/hardware.usable_share), else the reported size."""
    from pragma.tools import hardware

    levels = (hardware.cached_peaks() or {}).get("levels") or []
    if levels:
        return hardware.held_bytes(levels[-1])
    llc = hardware.last_level_cache(hardware.cpu_spec())
    return llc["size_bytes"] if llc else 0


def unmeasured_cache_roof(roof: dict) -> str:
    """Why a profile's cache-level roof cannot be checked here ('' when it can): the level it names
    measured no faster than DRAM on one thread (the profiles' default num_threads), so the roof is
    DRAM's. A VM on an Intel Xeon reported a 260 MiB L3 (its host's); the peak benchmark's half of
    it is not cache-resident there and read 14.9-15.9 GB/s against the DRAM triad's 19.1-21.4."""
    from pragma.tools import hardware

    levels = (hardware.cached_peaks() or {}).get("levels", [])
    level = next((lv for lv in levels if lv["name"] == roof["roof_level"]), None)
    if level is None or level["gbs_1t"] > float(roof["dram_gbs"]):
        return ""
    return (
        f"this machine's {level['name']} ({level['size_bytes'] >> 20} MiB) measured no faster than DRAM: "
        f"{level['gbs_1t']:.1f} against {float(roof['dram_gbs']):.1f} GB/s on one thread"
    )
