"""Run untrusted code (candidates, references) in a fresh, limited subprocess.

The child gets a private temporary directory, a scrubbed environment (no API keys), address-space,
CPU-time and core-size limits, its own session (so every process it forks is killed with it), and
no network where the machine allows a network namespace. The worker reports progress as JSON lines
in ``progress.jsonl``; the parent uses the current phase to apply the compile or run deadline.

``run_worker`` never raises for anything the child does: it returns a ``SandboxOutcome``.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTPUT_TAIL_CHARS = 4000
# Variables a candidate may see; everything else (API keys, tokens, proxies) is dropped.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "TMPDIR", "CXX", "CC", "TRITON_INTERPRET")


@dataclass
class SandboxOutcome:
    exit_code: int | None  # None when we killed it
    signal_name: str | None  # e.g. "SIGSEGV" when the child died from a signal
    timed_out_phase: str | None  # phase during which a deadline expired
    last_phase: str  # the last phase the worker announced
    result: dict[str, Any] | None  # the worker's result.json, if it wrote one
    output_tail: str  # last lines of stdout+stderr
    wall_s: float
    isolation: dict[str, str] = field(default_factory=dict)


@functools.lru_cache(maxsize=1)
def network_isolation() -> tuple[list[str], str]:
    """Prefix that runs a command without network, and a description of what applied."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return [], "none: unshare(1) not found"
    try:
        probe = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"none: {exc}"
    if probe.returncode != 0:
        return [], "none: network namespaces not permitted here"
    return [unshare, "--net"], "network namespace (no network)"


def _limits(memory_limit_bytes: int, cpu_limit_s: int) -> None:
    # Runs in the child between fork and exec.
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def sandbox_env(workdir: Path, num_threads: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    env.update(
        HOME=str(workdir),
        OMP_NUM_THREADS=str(num_threads),
        MKL_NUM_THREADS=str(num_threads),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra or {})
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_phase(progress: Path, default: str) -> str:
    try:
        lines = progress.read_text().splitlines()
    except OSError:
        return default
    for line in reversed(lines):
        try:
            return json.loads(line)["phase"]
        except (ValueError, KeyError, TypeError):
            continue
    return default


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - OUTPUT_TAIL_CHARS))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_worker(
    request: dict[str, Any],
    *,
    compile_timeout_s: float,
    run_timeout_s: float,
    memory_limit_bytes: int,
    num_threads: int,
    extra_env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    command_prefix: list[str] | None = None,
) -> SandboxOutcome:
    """Run ``pragma.tools.worker`` on ``request`` inside the sandbox.

    Deadlines: the "build" phase (import + construct, where compilation happens) gets
    ``compile_timeout_s``; everything after it gets ``run_timeout_s``.
    ``files`` are written into the private directory first (name -> text).
    """
    workdir = Path(tempfile.mkdtemp(prefix="pragma-sbx-"))
    try:
        for name, text in (files or {}).items():
            (workdir / name).write_text(text)
        request = {**request, "workdir": str(workdir)}
        (workdir / "request.json").write_text(json.dumps(request))
        progress = workdir / "progress.jsonl"
        out_path = workdir / "output.log"
        net_prefix, net_desc = network_isolation()
        argv = [*net_prefix, *(command_prefix or []), sys.executable, "-m", "pragma.tools.worker", str(workdir / "request.json")]
        env = sandbox_env(workdir, num_threads, extra_env)
        # PYTHONPATH lets the child import pragma even from a source checkout.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
        cpu_limit_s = int((compile_timeout_s + run_timeout_s) * max(1, num_threads) + 30)
        start = time.monotonic()
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(_limits, memory_limit_bytes, cpu_limit_s),
            )
            timed_out_phase = None
            phase_started = start
            phase = "start"
            while proc.poll() is None:
                time.sleep(0.05)
                now_phase = _read_phase(progress, phase)
                if now_phase != phase:
                    # The build deadline covers everything up to the end of "build".
                    if phase in ("start", "load_problem", "build") and now_phase not in ("load_problem", "build"):
                        phase_started = time.monotonic()
                    phase = now_phase
                limit = compile_timeout_s if phase in ("start", "load_problem", "build") else run_timeout_s
                if time.monotonic() - phase_started > limit:
                    timed_out_phase = phase
                    _kill_group(proc)
                    proc.wait()
                    break
            # Children the candidate forked die with the session, even after a clean exit.
            _kill_group(proc)
        wall_s = time.monotonic() - start
        code = proc.returncode
        sig = None
        if code is not None and code < 0:
            sig = signal.Signals(-code).name
        if timed_out_phase:
            code, sig = None, None
        result = None
        result_path = workdir / "result.json"
        if result_path.exists():
            try:
                result = json.loads(result_path.read_text())
            except ValueError:
                result = None
        return SandboxOutcome(
            exit_code=code,
            signal_name=sig,
            timed_out_phase=timed_out_phase,
            last_phase=_read_phase(progress, "start"),
            result=result,
            output_tail=_tail(out_path),
            wall_s=wall_s,
            isolation={"network": net_desc, "limits": f"address space {memory_limit_bytes} bytes, cpu {cpu_limit_s} s"},
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
