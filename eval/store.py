"""Where an evaluation keeps its files, and the checkpointer of its graph threads.

Defaults live in the data directory (``PRAGMA_DATA_DIR``, ``~/.pragma``):
``eval/results.sqlite`` (all runs) and ``eval/runs/RUN_ID/`` (checkpoints, best kernels).
On a cluster both move: the results database to a shared path or a PostgreSQL URL, the
checkpointer to PostgreSQL (``langgraph-checkpoint-postgres``, the ``scale`` extra).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pragma.eval.db import is_postgres
from pragma.graph.context import data_dir


def eval_dir() -> Path:
    path = data_dir() / "eval"
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_results_url() -> str:
    return str(eval_dir() / "results.sqlite")


def run_dir(run_id: str) -> Path:
    path = eval_dir() / "runs" / run_id
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_checkpoint_url(run_id: str) -> str:
    return str(run_dir(run_id) / "checkpoints.sqlite")


def thread_id(run_id: str, mode: str, problem: str) -> str:
    return f"eval-{run_id}-{mode}-{re.sub(r'[^A-Za-z0-9_.-]', '_', problem)}"


@contextmanager
def checkpointer(url: str) -> Iterator[Any]:
    """A LangGraph checkpointer on a SQLite file or a PostgreSQL URL."""
    if is_postgres(url):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise RuntimeError(
                "a PostgreSQL checkpointer needs the scale extra: pip install 'pragma-kernels[scale]'"
            ) from None
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()  # idempotent: creates or migrates the checkpoint tables
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    Path(url).parent.mkdir(parents=True, exist_ok=True)
    # Several worker processes write one file: wait for the lock instead of failing.
    conn = sqlite3.connect(url, check_same_thread=False, timeout=120)
    conn.execute("PRAGMA journal_mode=WAL")
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()
