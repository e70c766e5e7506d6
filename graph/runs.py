"""Run registry and checkpointer, both SQLite files in the data directory (outside the repo).

The registry remembers what the checkpointer does not: the problem, the output directory and the
Context of each thread, so ``--resume THREAD_ID`` continues with the same settings.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from pragma.graph.context import data_dir

SCHEMA = """CREATE TABLE IF NOT EXISTS runs (
    thread_id TEXT PRIMARY KEY, problem_path TEXT NOT NULL, out_dir TEXT NOT NULL,
    context_json TEXT NOT NULL, status TEXT NOT NULL, best_speedup REAL NOT NULL DEFAULT 0,
    iterations INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL)"""


def checkpoint_path() -> Path:
    return data_dir() / "checkpoints.sqlite"


@contextmanager
def checkpointer() -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(str(checkpoint_path()), check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(str(data_dir() / "runs.sqlite"))
    conn.row_factory = sqlite3.Row
    conn.execute(SCHEMA)
    return conn


def new_thread_id(problem_name: str) -> str:
    return f"{problem_name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def register(thread_id: str, problem_path: str, out_dir: str, context: dict[str, Any]) -> None:
    now = time.time()
    with _db() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
            (thread_id, problem_path, out_dir, json.dumps(context), "running", 0.0, 0, now, now),
        )


def update(thread_id: str, *, status: str, best_speedup: float, iterations: int) -> None:
    with _db() as conn:
        conn.execute(
            "UPDATE runs SET status=?, best_speedup=?, iterations=?, updated_at=? WHERE thread_id=?",
            (status, best_speedup, iterations, time.time(), thread_id),
        )


def get(thread_id: str) -> dict[str, Any] | None:
    with _db() as conn:
        row = conn.execute("SELECT * FROM runs WHERE thread_id=?", (thread_id,)).fetchone()
    return dict(row) if row else None


def list_runs() -> list[dict[str, Any]]:
    with _db() as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY created_at DESC")]


def with_live_status(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as ``pragma runs`` shows them: a run registered as running whose process is gone
    (no process holds its lock: killed, machine rebooted) reads ``killed``; the best and the
    candidate count of an unfinished run come from its last checkpoint (the accepted best)."""
    from pragma.graph import lock

    shown = []
    for r in rows:
        r = dict(r)
        if r["status"] == "running" and lock.holder(r["thread_id"]) is None:
            r["status"] = "killed"
        if r["status"] != "finished":
            state = checkpoint_values(r["thread_id"])
            if state:
                r["best_speedup"] = float((state.get("best") or {}).get("speedup", 0.0))
                r["iterations"] = int(state.get("iteration", 0))
        shown.append(r)
    return shown


def checkpoint_values(thread_id: str) -> dict[str, Any]:
    from pragma.graph.builder import compile_app

    if not checkpoint_path().exists():  # reading must not create it
        return {}
    with checkpointer() as saver:
        return compile_app(saver).get_state({"configurable": {"thread_id": thread_id}}).values or {}
