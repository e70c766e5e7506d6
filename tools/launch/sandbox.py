"""Run untrusted code (candidates, references) in a fresh, limited subprocess.

Layers, each reported in ``SandboxOutcome.isolation`` (and so in every verify result):

- environment: an allowlist (no API keys or tokens), HOME and TMPDIR in a private temp dir;
- limits: address space, CPU time, file size, no core files (rlimits set between fork and exec);
- processes: own session, and where permitted a PID namespace whose init is a shell, so every
  process the candidate starts (forked, daemonized, setsid) dies when the worker ends;
  without one, the process group is killed and a sweep kills anything carrying this run's token;
- network: a network namespace where permitted (``unshare``);
- filesystem: Landlock, applied by the worker to itself (``landlock.py``): writes only in the
  private dir, the build caches and the profiler's fifos;
- deadlines: the build phases get ``compile_timeout_s``, the rest ``run_timeout_s``; the worker
  announces phases in ``progress.jsonl`` and the parent kills the whole group when one expires.

``run_worker`` never raises for anything the child does: it returns a ``SandboxOutcome``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

OUTPUT_TAIL_CHARS = 4000
FILE_SIZE_LIMIT_BYTES = 512 * 2**20  # any one file the sandbox writes (output log, objects, .so)
# Variables a candidate may see; everything else (API keys, tokens, proxies) is dropped.
ENV_ALLOWLIST = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CXX",
    "CC",
    "TRITON_INTERPRET",
    "PRAGMA_TIMING_SLOT_PATH",
)  # the slot's lock file: a path, not a secret
BUILD_PHASES = ("start", "load_problem", "build", "build_best")
TOKEN_VAR = "PRAGMA_SANDBOX_TOKEN"


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
    phases_s: dict[str, float] = field(default_factory=dict)  # seconds per announced phase


def _probe(argv: list[str]) -> bool:
    try:
        return subprocess.run([*argv, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.lru_cache(maxsize=1)
def namespaces() -> tuple[tuple[str, ...], bool, dict[str, str]]:
    """(command prefix, whether it includes a PID namespace, descriptions) for this machine."""
    unshare = shutil.which("unshare")
    if unshare is None:
        why = "none: unshare(1) not found"
        return (), False, {"network": why, "processes": "process group + token sweep (no PID namespace)"}
    full = ("--net", "--pid", "--fork", "--kill-child")
    for extra, who in (((), "as root"), (("--user", "--map-root-user"), "in a user namespace")):
        if _probe([unshare, *extra, *full]):
            return (
                (unshare, *extra, *full),
                True,
                {
                    "network": f"network namespace, no interfaces ({who})",
                    "processes": "PID namespace: everything the candidate starts dies with it",
                },
            )
    for extra in ((), ("--user", "--map-root-user")):
        if _probe([unshare, *extra, "--net"]):
            return (
                (unshare, *extra, "--net"),
                False,
                {
                    "network": "network namespace, no interfaces",
                    "processes": "process group + token sweep (PID namespace not permitted)",
                },
            )
    why = "none: network namespaces not permitted here"
    return (), False, {"network": why, "processes": "process group + token sweep (no PID namespace)"}


MOUNT_PROC = ("--mount", "--mount-proc")


@functools.lru_cache(maxsize=1)
def mount_proc_permitted() -> bool:
    """Whether a mount namespace with a fresh /proc can be added to the PID namespace here.

    Used for verification only (the profilers' perf and callgrind keep the host /proc they know)."""
    prefix, has_pid_ns, _ = namespaces()
    return has_pid_ns and _probe([*prefix, *MOUNT_PROC])


def network_isolation() -> tuple[list[str], str]:
    """Kept for callers of the spine's API: (prefix, description of the network isolation)."""
    prefix, _, desc = namespaces()
    return list(prefix), desc["network"]


# Builds outside a verification (the tuner's and the profiler's prebuilds, a search round's
# parallel compiles) run at the lowest priority. Why: on 2 cores the timed rounds of a verification
# beside them (timing slot held) run one pinned thread; the tuner builds a dimension's variants in
# parallel, so one g++ could share the timed core at equal weight and steal slices of timed calls.
# At nice 19 it gets ~1.5% of a contended core and a woken timed call preempts it at once; alone
# it runs at full speed, and unlike SCHED_IDLE it cannot starve into its compile deadline.
# Since these builds also take the timing slot shared (verify._build), none of them overlaps a
# PRAGMA process's timed phase on the same slot file; the nice still covers timed work the slot
# does not see (another slot path, a user's own benchmark beside a run).
BUILD_NICE = 19


def _limits(memory_limit_bytes: int, cpu_limit_s: int, niceness: int = 0) -> None:
    # Runs in the child between fork and exec: only async-signal-safe work (no locks, no imports).
    if niceness:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))


def sandbox_env(workdir: Path, num_threads: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    env.update(
        HOME=str(workdir),
        TMPDIR=str(workdir),  # compilers write temporaries here: the only writable scratch space
        OMP_NUM_THREADS=str(num_threads),
        MKL_NUM_THREADS=str(num_threads),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        # torch puts its allocations of 2 MiB and more on transparent huge pages (2 MiB aligned,
        # madvise). Every runner keeps its heap (tools/launch/spawn.py: steady_heap), so its outputs sit on
        # the same physical pages call after call; on 4 KiB pages that placement was a bias fixed per
        # process (the same ReLU kernel read +-7.0% and +-9.9% over 5 verifications, 0.89-1.09x of
        # itself), on huge pages +-2.2% and +-3.8% (bench_verifier, 2-core VM, load 0.8-1.0).
        THP_MEM_ALLOC_ENABLE="1",
    )
    env.update(extra or {})
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _carriers(needle: bytes) -> list[int]:
    """Live (not zombie) processes whose environment contains ``needle``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] in (b"Z", b"X"):
                    continue  # already dead, waiting to be reaped
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def sweep_token(token: str, grace_s: float = 1.0) -> int:
    """Kill every process whose environment carries ``token`` and that is still alive ``grace_s``
    after the group was killed (a PID namespace takes a moment to tear down); returns how many."""
    needle = f"{TOKEN_VAR}={token}".encode()
    deadline = time.monotonic() + grace_s
    while (pids := _carriers(needle)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(pids)


def _progress(progress: Path) -> list[tuple[str, float]]:
    try:
        lines = progress.read_text().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            rec = json.loads(line)
            events.append((str(rec["phase"]), float(rec["t"])))
        except (ValueError, KeyError, TypeError):
            continue
    return events


def _read_phase(progress: Path, default: str) -> str:
    events = _progress(progress)
    return events[-1][0] if events else default


def phase_durations(events: list[tuple[str, float]], spawn_t: float, end_t: float) -> dict[str, float]:
    """Seconds per phase; "startup" is process start to the first announcement (interpreter, torch
    import, confinement), "teardown" from the worker's "done" to the parent seeing it exit."""
    out: dict[str, float] = {}
    marks = [("startup", spawn_t), *((("teardown" if n == "done" else n), t) for n, t in events), ("", end_t)]
    for (name, t0), (_, t1) in zip(marks, marks[1:], strict=False):
        if name:
            out[name] = round(out.get(name, 0.0) + max(0.0, t1 - t0), 4)
    return out


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - OUTPUT_TAIL_CHARS))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _writable_paths(request: dict[str, Any], extra_env: dict[str, str] | None) -> list[str]:
    """Where the worker may write besides its own dir: build caches named in the environment,
    the directories of any fifos the request names (perf control), and /dev/null."""
    paths = ["/dev/null"]
    paths += [v for v in (extra_env or {}).values() if os.path.isabs(v) and os.path.isdir(v)]
    paths += [str(Path(v).parent) for k, v in request.items() if k.endswith("_fifo") and isinstance(v, str)]
    return paths


class Zygote:
    """A pre-started judge kept by this launcher thread (``tools/launch/zygote.py``): the sandbox's process
    with torch imported, forking one judge per verification, so a verification does not pay the
    interpreter start and ``import torch`` (~1.5 s here, 6 s under load).

    Started with the same prefix (namespaces, fresh /proc), environment allowlist and rlimits as a
    one-off judge. Keyed by what the process's environment fixes at start (threads, the build
    caches, backend variables, the memory limit): OpenMP reads OMP_NUM_THREADS once per process.
    It dies with the thread that started it (PR_SET_PDEATHSIG on the unshare process)."""

    _pool: dict[int, Zygote] = {}  # by launcher thread
    _lock = threading.Lock()

    def __init__(self, key: tuple, num_threads: int, memory_limit_bytes: int, extra_env: dict[str, str]):
        self.key = key
        self.dir = Path(tempfile.mkdtemp(prefix="pragma-zygote-"))
        prefix, has_pid_ns, desc = namespaces()
        self.desc = dict(desc)
        if mount_proc_permitted():
            prefix = (*prefix, *MOUNT_PROC)
            self.desc["proc"] = "fresh /proc in its own mount namespace: only the sandbox's processes are visible"
        else:
            self.desc["proc"] = "none: host /proc (mount namespace not permitted here)"
        self.fresh_proc = "--mount-proc" in prefix
        command = [sys.executable, "-m", "pragma.tools.launch.zygote", *(["--pid-ns"] if self.fresh_proc else [])]
        if has_pid_ns:
            command = ["/bin/sh", "-c", '"$@"; exit $?', "pragma-sandbox", *command]
        env = sandbox_env(self.dir, num_threads, extra_env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
        self.has_pid_ns = has_pid_ns
        self.memory_limit_bytes = memory_limit_bytes
        self.log = open(self.dir / "zygote.log", "wb")  # noqa: SIM115 - lives as long as the zygote
        self.proc = subprocess.Popen(
            [*prefix, *command],
            cwd=self.dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
            preexec_fn=functools.partial(_zygote_limits, memory_limit_bytes),
        )
        ready = self._read(timeout_s=120)
        if not ready.get("ready"):
            self.close()
            raise OSError(f"zygote did not start: {_tail(self.dir / 'zygote.log')[-300:]}")

    @classmethod
    def for_job(cls, num_threads: int, memory_limit_bytes: int, extra_env: dict[str, str]) -> Zygote | None:
        key = (
            num_threads,
            memory_limit_bytes,
            tuple(sorted(extra_env.items())),
            tuple(os.environ.get(k, "") for k in ENV_ALLOWLIST),
        )
        thread = threading.get_ident()
        with cls._lock:  # at most one per thread: a new key replaces the thread's old zygote
            z = cls._pool.get(thread)
            if z is not None and z.key == key and z.proc.poll() is None:
                return z
            if z is not None:
                z.close()
                del cls._pool[thread]
            try:
                z = cls(key, num_threads, memory_limit_bytes, extra_env)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                log.warning("no pre-started judge (%s): one sandbox per verification", exc)
                return None
            cls._pool[thread] = z
            return z

    @classmethod
    def discard(cls, zygote: Zygote) -> None:
        with cls._lock:
            for thread, z in list(cls._pool.items()):
                if z is zygote:
                    del cls._pool[thread]
        zygote.close()

    def _read(self, timeout_s: float) -> dict[str, Any]:
        import select

        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            return {}
        line = self.proc.stdout.readline()
        try:
            return json.loads(line) if line else {}
        except ValueError:
            return {}

    def run(
        self,
        request_path: Path,
        workdir: Path,
        env: dict[str, str],
        cpu_limit_s: int,
        progress: Path,
        compile_timeout_s: float,
        run_timeout_s: float,
    ) -> tuple[int | None, str | None]:
        """(exit code as Popen reports it, expired phase) of one judge forked from the zygote."""
        job = {
            "request": str(request_path),
            "workdir": str(workdir),
            "env": env,
            "cpu_limit_s": cpu_limit_s,
            "memory_limit_bytes": self.memory_limit_bytes,
        }
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()
        if "started" not in self._read(timeout_s=30):
            raise OSError("zygote did not start the job")
        phase_started, phase, expired = time.monotonic(), "start", None
        while True:
            msg = self._read(timeout_s=0.05)
            if "exit" in msg:
                return os.waitstatus_to_exitcode(int(msg["exit"])), expired
            if self.proc.poll() is not None:
                raise OSError("zygote died during a job")
            if expired:
                continue
            now_phase = _read_phase(progress, phase)
            if now_phase != phase:
                if phase in BUILD_PHASES and now_phase not in BUILD_PHASES:
                    phase_started = time.monotonic()
                phase = now_phase
            limit = compile_timeout_s if phase in BUILD_PHASES else run_timeout_s
            if time.monotonic() - phase_started > limit:
                expired = phase
                self.proc.stdin.write(b'{"kill": true}\n')
                self.proc.stdin.flush()

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _zygote_limits(memory_limit_bytes: int) -> None:
    # Between fork and exec of the zygote's unshare: die with the launcher thread, and the same
    # address-space/core/file limits as a one-off sandbox (each job sets its own CPU limit).
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))


def run_worker(
    request: Mapping[str, Any],
    *,
    compile_timeout_s: float,
    run_timeout_s: float,
    memory_limit_bytes: int,
    num_threads: int,
    extra_env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    command_prefix: list[str] | None = None,
    prestarted: bool = False,
) -> SandboxOutcome:
    """Run ``pragma.tools.inside.worker`` on ``request`` inside the sandbox.

    Deadlines: the build phases (import + construct, where compilation happens) get
    ``compile_timeout_s``; everything after them gets ``run_timeout_s``.
    ``files`` are written into the private directory first (name -> text).
    ``prestarted``: verification only, fork the judge from this thread's pre-started one
    (``Zygote``); falls back to a fresh sandbox when it cannot start.
    """
    workdir = Path(tempfile.mkdtemp(prefix="pragma-sbx-"))
    token = secrets.token_hex(8)
    try:
        for name, text in (files or {}).items():
            (workdir / name).write_text(text)
        ns_prefix, has_pid_ns, ns_desc = namespaces()
        ns_desc = dict(ns_desc)
        if request.get("mode") in ("verify", "build"):  # build: g++ on untrusted source (#include "/proc/...")
            if mount_proc_permitted():
                # The sandbox sees only its own processes: no host environ or cmdline to read.
                ns_prefix = (*ns_prefix, *MOUNT_PROC)
                ns_desc["proc"] = "fresh /proc in its own mount namespace: only the sandbox's processes are visible"
            else:
                ns_desc["proc"] = "none: host /proc (mount namespace not permitted here)"
        request = {
            **request,
            "workdir": str(workdir),
            "memory_limit_bytes": memory_limit_bytes,
            "writable_paths": _writable_paths(request, extra_env),
            "fresh_proc": "--mount-proc" in ns_prefix,
        }
        (workdir / "request.json").write_text(json.dumps(request))
        progress = workdir / "progress.jsonl"
        out_path = workdir / "output.log"
        # Verification: the judge, which forks runners for the candidate code; profile/probe: the worker.
        module = "pragma.tools.judging.judge" if request.get("mode") == "verify" else "pragma.tools.inside.worker"
        command = [*(command_prefix or []), sys.executable, "-m", module, str(workdir / "request.json")]
        if has_pid_ns:
            # A shell is the namespace's init (PID 1 ignores signals it has no handler for, which
            # would turn the worker's abort() into a SIGSEGV); it reports the worker's status.
            command = ["/bin/sh", "-c", '"$@"; exit $?', "pragma-sandbox", *command]
        argv = [*ns_prefix, *command]
        env = sandbox_env(workdir, num_threads, extra_env)
        env[TOKEN_VAR] = token
        # PYTHONPATH lets the child import pragma even from a source checkout.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
        cpu_limit_s = int((compile_timeout_s + run_timeout_s) * max(1, num_threads) + 30)
        spawn_t = time.time()
        start = time.monotonic()
        zygote = (
            Zygote.for_job(num_threads, memory_limit_bytes, extra_env or {})
            if prestarted and request.get("mode") == "verify" and not command_prefix
            else None
        )
        if zygote is not None:
            try:
                return _run_in_zygote(
                    zygote,
                    workdir,
                    request,
                    env,
                    cpu_limit_s,
                    progress,
                    compile_timeout_s,
                    run_timeout_s,
                    memory_limit_bytes,
                    token,
                )
            except (OSError, ValueError) as exc:  # the zygote broke: this verification runs the one-off way
                log.warning("pre-started judge failed (%s); starting a fresh sandbox", exc)
                Zygote.discard(zygote)
                for leftover in ("progress.jsonl", "output.log", "result.json"):
                    (workdir / leftover).unlink(missing_ok=True)
                (workdir / "request.json").write_text(json.dumps(request))
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(
                    _limits, memory_limit_bytes, cpu_limit_s, BUILD_NICE if request.get("mode") == "build" else 0
                ),
            )
            timed_out_phase = _wait(proc, progress, compile_timeout_s, run_timeout_s)
            # Children the candidate forked die with the session, even after a clean exit.
            _kill_group(proc)
        end_t = time.time()
        swept = sweep_token(token)
        if swept:
            log.warning("killed %d process(es) that escaped the sandbox's process group", swept)
        wall_s = time.monotonic() - start
        code = proc.returncode
        sig = _signal_of(code, has_pid_ns)
        if timed_out_phase:
            code, sig = None, None
        result = None
        result_path = workdir / "result.json"
        if result_path.exists():
            try:
                result = json.loads(result_path.read_text())
            except ValueError:
                result = None
        isolation = {
            "environment": f"allowlist ({', '.join(ENV_ALLOWLIST)}); HOME and TMPDIR private",
            "limits": f"address space {memory_limit_bytes} bytes, cpu {cpu_limit_s} s, "
            f"file size {FILE_SIZE_LIMIT_BYTES} bytes, no core files",
            **ns_desc,
            "filesystem": "unknown: the worker did not report (it died before writing a result)",
            # What the process inside reported of its own layers (filesystem; the judge: runners).
            **{str(k): str(v)[:300] for k, v in (((result or {}).get("isolation") or {}).items())},
            "stray_processes_killed": str(swept),
        }
        return SandboxOutcome(
            exit_code=code,
            signal_name=sig,
            timed_out_phase=timed_out_phase,
            last_phase=_read_phase(progress, "start"),
            result=result,
            output_tail=_tail(out_path),
            wall_s=wall_s,
            isolation=isolation,
            phases_s=phase_durations(_progress(progress), spawn_t, end_t),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_in_zygote(
    zygote: Zygote,
    workdir: Path,
    request: dict[str, Any],
    env: dict[str, str],
    cpu_limit_s: int,
    progress: Path,
    compile_timeout_s: float,
    run_timeout_s: float,
    memory_limit_bytes: int,
    token: str,
) -> SandboxOutcome:
    request = {**request, "fresh_proc": zygote.fresh_proc}
    (workdir / "request.json").write_text(json.dumps(request))
    spawn_t, start = time.time(), time.monotonic()
    code, timed_out_phase = zygote.run(
        workdir / "request.json", workdir, env, cpu_limit_s, progress, compile_timeout_s, run_timeout_s
    )
    end_t = time.time()
    swept = 0 if zygote.fresh_proc else sweep_token(token)
    sig = None if timed_out_phase else _signal_of(code, False)
    result = None
    if (workdir / "result.json").exists():
        try:
            result = json.loads((workdir / "result.json").read_text())
        except ValueError:
            result = None
    isolation = {
        "environment": f"allowlist ({', '.join(ENV_ALLOWLIST)}); HOME and TMPDIR private",
        "limits": f"address space {memory_limit_bytes} bytes, cpu {cpu_limit_s} s, "
        f"file size {FILE_SIZE_LIMIT_BYTES} bytes, no core files",
        **zygote.desc,
        "startup": "judge forked from a pre-started sandboxed process (torch imported once per launcher thread); "
        "every other process in its namespace is killed after each verification",
        "filesystem": "unknown: the worker did not report (it died before writing a result)",
        **{str(k): str(v)[:300] for k, v in (((result or {}).get("isolation") or {}).items())},
        "stray_processes_killed": str(swept),
    }
    return SandboxOutcome(
        exit_code=None if timed_out_phase else code,
        signal_name=sig,
        timed_out_phase=timed_out_phase,
        last_phase=_read_phase(progress, "start"),
        result=result,
        output_tail=_tail(workdir / "output.log"),
        wall_s=time.monotonic() - start,
        isolation=isolation,
        phases_s=phase_durations(_progress(progress), spawn_t, end_t),
    )


def _wait(proc: subprocess.Popen, progress: Path, compile_timeout_s: float, run_timeout_s: float) -> str | None:
    """Poll until the child exits or its phase's deadline expires; returns the expired phase."""
    phase_started = time.monotonic()
    phase = "start"
    while proc.poll() is None:
        time.sleep(0.05)
        now_phase = _read_phase(progress, phase)
        if now_phase != phase:
            # The build deadline covers everything up to the end of the build phases.
            if phase in BUILD_PHASES and now_phase not in BUILD_PHASES:
                phase_started = time.monotonic()
            phase = now_phase
        limit = compile_timeout_s if phase in BUILD_PHASES else run_timeout_s
        if time.monotonic() - phase_started > limit:
            _kill_group(proc)
            proc.wait()
            return phase
    return None


def _signal_of(code: int | None, via_shell: bool) -> str | None:
    """Signal that ended the worker: negative codes directly, 128+N through the init shell."""
    try:
        if code is not None and code < 0:
            return signal.Signals(-code).name
        if via_shell and code is not None and 128 < code < 128 + 65:
            return signal.Signals(code - 128).name
    except ValueError:
        return None
    return None
