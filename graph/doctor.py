"""``pragma doctor``: is this machine ready? One verdict and one fix per facility."""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pragma.graph.context import Context, data_dir

Verdict = Literal["ok", "warn", "fail"]


@dataclass
class Check:
    name: str
    verdict: Verdict
    detail: str
    fix: str = ""


def _run(argv: list[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None


def check_llm(ctx: Context) -> Check:
    from pragma.nodes import llm, local_model

    spec = ctx.coder_model
    if (not spec or spec in ("openai", "openai:")) and llm.setting("coder", "BASE_URL"):
        # An endpoint without a model name: PRAGMA uses the server's only model (GET /models).
        url = llm.setting("coder", "BASE_URL")
        try:
            model = llm.served_model("coder")
        except llm.LLMError as exc:
            return Check("llm", "fail", str(exc), "set PRAGMA_CODER_MODEL=openai:NAME")
        return Check(
            "llm",
            "ok",
            f"will use openai:{model}, the only model {url} serves (no model named)",
            f"set PRAGMA_CODER_MODEL=openai:{model} to pin it",
        )
    if not spec:
        if local_model.is_installed():
            return Check(
                "llm",
                "ok",
                "no endpoint configured: the embedded local model will be used",
                "set PRAGMA_CODER_MODEL and PRAGMA_LLM_BASE_URL to use your own endpoint",
            )
        return Check(
            "llm", "fail", "no LLM configured and the embedded model is not installed", llm.not_configured_message()
        )
    if not spec.startswith("openai:"):
        return Check("llm", "ok", f"model {spec}")
    url = llm.setting("coder", "BASE_URL") or "https://api.openai.com/v1"
    request = urllib.request.Request(f"{url.rstrip('/')}/models")
    if key := llm.setting("coder", "API_KEY"):
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return Check("llm", "ok", f"{spec} at {url} answers (HTTP {resp.status})")
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return Check("llm", "fail", f"{url} rejected the API key", "check PRAGMA_LLM_API_KEY")
        return Check("llm", "warn", f"{url}/models answered HTTP {exc.code}", "check PRAGMA_LLM_BASE_URL")
    except (OSError, ValueError) as exc:
        return Check("llm", "fail", f"cannot reach {url}: {exc}", "start the server or fix PRAGMA_LLM_BASE_URL")


def check_compiler(ctx: Context) -> Check:
    from pragma.tools.inside import cext

    if shutil.which(cext.COMPILER) is None:
        return Check("compiler", "fail", f"{cext.COMPILER} not found", "apt-get install g++")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text('extern "C" int pragma_probe(int x) { return x + 1; }\n')
        proc = _run([cext.COMPILER, *cext.DEFAULT_FLAGS, str(src), "-o", str(Path(tmp) / "probe.so")], 120)
    if proc is None or proc.returncode != 0:
        return Check(
            "compiler",
            "fail",
            f"{cext.COMPILER} cannot build a shared object with the fast-path flags",
            (proc.stderr.strip().splitlines() or [""])[-1] if proc else "",
        )
    return Check("compiler", "ok", f"{cext.COMPILER} builds the fast path ({' '.join(cext.DEFAULT_FLAGS)})")


def check_perf(ctx: Context) -> Check:
    if shutil.which("perf") is None:
        return Check(
            "perf",
            "warn",
            "perf not installed: profiles fall back to timing and static evidence",
            "apt-get install linux-perf (make setup does it as root)",
        )
    proc = _run(["perf", "stat", "-x,", "-e", "task-clock,instructions", "true"])
    if proc is None or proc.returncode != 0:
        return Check("perf", "warn", "perf cannot count here", "check /proc/sys/kernel/perf_event_paranoid")
    if "<not supported>" in proc.stderr:
        return Check(
            "perf",
            "warn",
            "perf works with software events only (no hardware counters: VM/container)",
            "run on bare metal or a VM with a virtual PMU for counters; callgrind covers the gap",
        )
    return Check("perf", "ok", "perf counts hardware events")


def check_tool(name: str, package: str, role: str) -> Callable[[Context], Check]:
    def check(ctx: Context) -> Check:
        if shutil.which(name) is None:
            return Check(name, "warn", f"{name} not installed: no {role}", f"apt-get install {package}")
        return Check(name, "ok", f"{name} available for {role}")

    return check


def check_knowledge(ctx: Context) -> Check:
    if importlib.util.find_spec("pragma.knowledge.store") is None:
        return Check("knowledge", "warn", "knowledge store module not present in this version")
    try:
        from pragma.knowledge import store

        status = store.status() if hasattr(store, "status") else None
    except Exception as exc:  # a broken store must not stop the doctor
        return Check("knowledge", "fail", f"knowledge store unusable: {exc}", "pragma knowledge build")
    if not status:
        return Check("knowledge", "warn", "knowledge store not built yet", "pragma knowledge build")
    return Check("knowledge", "ok", str(status))


def check_checkpointer(ctx: Context) -> Check:
    from pragma.graph import runs

    path = runs.checkpoint_path()
    try:
        with sqlite3.connect(str(path)) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS pragma_doctor (x)")
            conn.execute("DROP TABLE pragma_doctor")
    except sqlite3.Error as exc:
        return Check("checkpointer", "fail", f"cannot write {path}: {exc}", "set PRAGMA_DATA_DIR to a writable dir")
    return Check("checkpointer", "ok", f"SQLite checkpoints in {path} (data dir {data_dir()})")


CHECKS: list[Callable[[Context], Check]] = [
    check_llm,
    check_compiler,
    check_perf,
    check_tool("valgrind", "valgrind", "cache/branch simulation"),
    check_tool("objdump", "binutils", "instruction mix"),
    check_knowledge,
    check_checkpointer,
]


def run_checks(ctx: Context) -> list[Check]:
    return [check(ctx) for check in CHECKS]
