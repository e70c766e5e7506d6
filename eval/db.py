"""The results database: a SQLite file (default) or a PostgreSQL URL, same schema and SQL.

Tables (one row per ...):
- ``eval_runs``: evaluation run (suite, modes, settings, machine);
- ``eval_problems``: problem x mode of a run (status, best speedup and its CI, tokens, cost, time);
- ``eval_attempts``: problem x mode x attempt (status, speedup and CI, tokens, time).

Writers upsert (``ON CONFLICT ... DO UPDATE``, SQLite >= 3.24 and PostgreSQL alike), so a resumed
job can re-record what it already recorded without duplicates. Connections are opened per
operation: the harness forks workers, and nothing open may cross a fork.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# DOUBLE PRECISION, not REAL: PostgreSQL's REAL is 4 bytes (SQLite reads either as 8-byte REAL).
RUN_COLUMNS = {
    "run_id": "TEXT PRIMARY KEY",
    "suite_dir": "TEXT",
    "overrides_path": "TEXT",
    "patterns_json": "TEXT",
    "modes_json": "TEXT",
    "context_json": "TEXT",
    "settings_json": "TEXT",
    "machine_json": "TEXT",
    "status": "TEXT",
    "created_at": "DOUBLE PRECISION",
    "updated_at": "DOUBLE PRECISION",
    "wall_s": "DOUBLE PRECISION",
}
PROBLEM_COLUMNS = {
    "run_id": "TEXT",
    "problem": "TEXT",
    "mode": "TEXT",
    "category": "TEXT",
    "path": "TEXT",
    "sha256": "TEXT",
    "thread_id": "TEXT",
    "status": "TEXT",
    "solved": "INTEGER",
    "best_speedup": "DOUBLE PRECISION",
    "best_iteration": "INTEGER",
    "best_ci_low": "DOUBLE PRECISION",
    "best_ci_high": "DOUBLE PRECISION",
    "iterations": "INTEGER",
    "input_tokens": "DOUBLE PRECISION",
    "output_tokens": "DOUBLE PRECISION",
    "cost_usd": "DOUBLE PRECISION",
    "llm_calls": "DOUBLE PRECISION",
    "tune_s": "DOUBLE PRECISION",
    "tune_variants": "INTEGER",
    "wall_s": "DOUBLE PRECISION",
    "ref_ms": "DOUBLE PRECISION",
    "stop_reason": "TEXT",
    "message": "TEXT",
    "worker": "TEXT",
    "started_at": "DOUBLE PRECISION",
    "finished_at": "DOUBLE PRECISION",
}
ATTEMPT_COLUMNS = {
    "run_id": "TEXT",
    "problem": "TEXT",
    "mode": "TEXT",
    "iteration": "INTEGER",
    "origin": "TEXT",
    "status": "TEXT",
    "accepted": "INTEGER",
    "speedup": "DOUBLE PRECISION",
    "ci_low": "DOUBLE PRECISION",
    "ci_high": "DOUBLE PRECISION",
    "runtime_ms": "DOUBLE PRECISION",
    "ref_runtime_ms": "DOUBLE PRECISION",
    "max_abs_diff": "DOUBLE PRECISION",
    "input_tokens": "DOUBLE PRECISION",
    "output_tokens": "DOUBLE PRECISION",
    "cost_usd": "DOUBLE PRECISION",
    "llm_wall_s": "DOUBLE PRECISION",
    "verify_wall_s": "DOUBLE PRECISION",
    # Sequential acceptance testing (issue 13): batches of timing added because the CI against
    # the best straddled the bar after the first, and whether they decided it (1) or not (0).
    "extra_batches": "INTEGER",
    "decision_changed": "INTEGER",
    "message": "TEXT",
    "recorded_at": "DOUBLE PRECISION",
}
KEYS = {
    "eval_runs": ("run_id",),
    "eval_problems": ("run_id", "problem", "mode"),
    "eval_attempts": ("run_id", "problem", "mode", "iteration"),
}
TABLES = {"eval_runs": RUN_COLUMNS, "eval_problems": PROBLEM_COLUMNS, "eval_attempts": ATTEMPT_COLUMNS}
# Kept from the first write when a row is re-recorded (an attempt's time of record, a CI that a
# resumed job can no longer see).
KEEP_FIRST = {"recorded_at", "started_at", "created_at"}
KEEP_IF_NULL = {"ci_low", "ci_high", "best_ci_low", "best_ci_high"}


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def _ddl(table: str) -> str:
    cols = ", ".join(f"{name} {kind}" for name, kind in TABLES[table].items())
    key = "" if table == "eval_runs" else f", PRIMARY KEY ({', '.join(KEYS[table])})"
    return f"CREATE TABLE IF NOT EXISTS {table} ({cols}{key})"


class ResultsDB:
    """Thin wrapper: ``?`` placeholders everywhere, translated for psycopg."""

    def __init__(self, url: str):
        self.url = url
        self.postgres = is_postgres(url)
        if not self.postgres:
            Path(url).expanduser().parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            for table in TABLES:
                self._run(conn, _ddl(table), ())
                self._add_missing_columns(conn, table)
            if not self.postgres:
                conn.execute("PRAGMA journal_mode=WAL")  # readers (progress, report) never block writers

    def _add_missing_columns(self, conn: Any, table: str) -> None:
        """A results database written by an older PRAGMA lacks columns added since: add them (NULL
        in old rows), so old runs stay readable and resumable."""
        if self.postgres:
            cur = conn.execute(f"SELECT * FROM {table} LIMIT 0")
            present = {d.name for d in cur.description}
        else:
            present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})").fetchall()}
        for name, kind in TABLES[table].items():
            if name in present:
                continue
            if self.postgres:
                self._run(conn, f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {kind}", ())
                continue
            try:
                self._run(conn, f"ALTER TABLE {table} ADD COLUMN {name} {kind}", ())
            except sqlite3.OperationalError as exc:  # another worker added it between the check and here
                if "duplicate column" not in str(exc):
                    raise

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        if self.postgres:
            import psycopg

            conn = psycopg.connect(self.url, autocommit=True)
        else:
            # Workers write concurrently; SQLite serializes them, so wait rather than fail.
            conn = sqlite3.connect(str(Path(self.url).expanduser()), timeout=120, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()

    def _run(self, conn: Any, sql: str, params: tuple) -> list[dict[str, Any]]:
        if self.postgres:
            cur = conn.execute(sql.replace("?", "%s"), params)
            if cur.description is None:
                return []
            names = [d.name for d in cur.description]
        else:
            cur = conn.execute(sql, params)
            if cur.description is None:
                return []
            names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def query(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        with self._connect() as conn:
            return self._run(conn, sql, params)

    def upsert(self, table: str, row: dict[str, Any]) -> None:
        columns = TABLES[table]
        unknown = set(row) - set(columns)
        if unknown:
            raise KeyError(f"{table} has no column(s) {', '.join(sorted(unknown))}")
        names = list(row)
        updates = []
        for name in names:
            if name in KEYS[table]:
                continue
            if name in KEEP_FIRST:
                updates.append(f"{name} = COALESCE({table}.{name}, excluded.{name})")
            elif name in KEEP_IF_NULL:
                updates.append(f"{name} = COALESCE(excluded.{name}, {table}.{name})")
            else:
                updates.append(f"{name} = excluded.{name}")
        sql = (
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
            f"ON CONFLICT ({', '.join(KEYS[table])}) "
            + (f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING")
        )
        with self._connect() as conn:
            self._run(conn, sql, tuple(row[n] for n in names))

    # -- conveniences used by the harness, jobs and reports ---------------------------------------

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM eval_runs WHERE run_id = ?", (run_id,))
        return rows[0] if rows else None

    def runs(self) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM eval_runs ORDER BY created_at DESC")

    def problems(self, run_id: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM eval_problems WHERE run_id = ? ORDER BY problem, mode", (run_id,))

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM eval_attempts WHERE run_id = ? ORDER BY problem, mode, iteration", (run_id,))

    def add_wall(self, run_id: str, problem: str, mode: str, seconds: float) -> None:
        with self._connect() as conn:
            self._run(
                conn,
                "UPDATE eval_problems SET wall_s = COALESCE(wall_s, 0) + ? "
                "WHERE run_id = ? AND problem = ? AND mode = ?",
                (seconds, run_id, problem, mode),
            )

    def set_run_status(self, run_id: str, status: str, wall_s: float | None = None) -> None:
        with self._connect() as conn:
            self._run(
                conn,
                "UPDATE eval_runs SET status = ?, updated_at = ?, wall_s = COALESCE(wall_s, 0) + ? WHERE run_id = ?",
                (status, time.time(), wall_s or 0.0, run_id),
            )


def loads(text: str | None, default: Any) -> Any:
    return json.loads(text) if text else default
