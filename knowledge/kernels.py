"""A memory of verified kernels: a second Chroma collection beside the profiler compendium.

Why: a small model writes a correct kernel far more often when it is shown a verified kernel for
a similar operator. Each record is one kernel the verifier accepted: the problem's source (what
is embedded, so retrieval finds similar operators), its category, the code (the C++ of a
kernel-format candidate, else the whole module), the format, the speedup and a one-line profile
summary. The collection is seeded with the kernels in ``knowledge/data/kernels/`` (written for
the example problems' categories and verified by ``tests/test_kernel_memory.py``) and grows with
every run's accepted best (``Context.kernel_memory``; ``nodes/profiler.py`` adds it). A record's
id is the SHA-256 of (problem source, format), so a faster best for the same problem replaces it.

Embedding is the compendium's offline MiniLM (``store.embedding_function``): Chroma's default
would download a model. Retrieval failures never stop a run: the Coder's prompt simply has no
examples (logged).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

COLLECTION = "pragma_kernels"
SEED_DIR = Path(__file__).parent / "data" / "kernels"
# Embedded text per record: the reference's docstring and class (MiniLM reads 256 word pieces).
DOC_CHARS = 1200


# Chroma's client is not safe to create from several threads at once (a search round's parallel
# Coder calls each query the memory): one thread of a process uses it at a time.
_LOCK = threading.RLock()


def _serialized(func: Callable[..., T]) -> Callable[..., T]:
    """One thread of one process at a time, each on a fresh view of the store. Why fresh: the
    memory is shared by processes (``pragma eval --workers 2`` runs jobs in separate interpreters,
    and every job's profiler adds its best), and a Chroma client keeps the vector index it loaded:
    after another process added a kernel, a filtered query here failed with "Error finding id"
    (7 Coder prompts of a 12-problem eval went without the memory). Dropping Chroma's per-process
    client cache makes the next client read the store as it is on disk now."""

    @functools.wraps(func)
    def locked(*args: Any, **kwargs: Any) -> T:
        from chromadb.api.client import SharedSystemClient

        from pragma.knowledge import paths

        with _LOCK:
            if _DEPTH[0]:  # called from another locked function (query -> ensure): already fresh
                return func(*args, **kwargs)
            with open(paths.knowledge_dir() / "kernels.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                SharedSystemClient.clear_system_cache()
                _DEPTH[0] += 1
                try:
                    return func(*args, **kwargs)
                finally:
                    _DEPTH[0] -= 1

    return locked


_DEPTH = [0]  # how many locked calls the thread holding _LOCK is inside


def _collection() -> Any:
    from pragma.knowledge import store

    return store.client().get_or_create_collection(
        COLLECTION, embedding_function=store.embedding_function(), configuration={"hnsw": {"space": "cosine"}}
    )


def problem_text(source: str) -> str:
    """What identifies an operator: the docstring and the Model class (sizes and imports dropped)."""
    doc = re.match(r'\s*(?:"""(.*?)"""|\'\'\'(.*?)\'\'\')', source, re.DOTALL)
    start = source.find("class Model")
    body = source[start:] if start >= 0 else source
    body = body.split("\ndef get_inputs")[0]
    head = (doc.group(1) or doc.group(2) or "").strip() if doc else ""
    return f"{head}\n{body}".strip()[:DOC_CHARS]


def category_of(source: str) -> str:
    """'category: X' from the problem's docstring (the suites' convention), else ''."""
    m = re.search(r"category:\s*([A-Za-z0-9_-]+)", source[:500])
    return m.group(1).lower() if m else ""


def record_id(source: str, fmt: str) -> str:
    return hashlib.sha256(f"{fmt}\0{source}".encode()).hexdigest()[:24]


@_serialized
def add(
    *,
    source: str,
    name: str,
    code: str,
    fmt: str,
    speedup: float,
    profile_summary: str = "",
    category: str = "",
    origin: str = "run",
    collection: Any = None,
) -> str:
    """Store one verified kernel (replacing a slower one for the same problem and format)."""
    col = collection if collection is not None else _collection()
    rid = record_id(source, fmt)
    old = col.get(ids=[rid], include=["metadatas"])
    if old["ids"] and float(old["metadatas"][0].get("speedup", 0.0)) >= speedup and origin == "run":
        return rid  # the memory keeps the fastest verified kernel per problem
    col.upsert(
        ids=[rid],
        documents=[problem_text(source)],
        metadatas=[
            {
                "name": name,
                "category": category or category_of(source),
                "format": fmt,
                "speedup": float(speedup),
                "profile_summary": profile_summary[:300],
                "origin": origin,
                "code": code,
                "source": source[:4000],
            }
        ],
    )
    return rid


def seed_records() -> list[dict[str, Any]]:
    """The shipped kernels: manifest entries with their C++ and the problem's source."""
    manifest = json.loads((SEED_DIR / "manifest.json").read_text())
    root = Path(__file__).resolve().parent.parent
    out = []
    for entry in manifest:
        out.append(
            {**entry, "code": (SEED_DIR / entry["kernel"]).read_text(), "source": (root / entry["problem"]).read_text()}
        )
    return out


@_serialized
def ensure() -> Any:
    """The collection, with every shipped seed present (added once; cheap afterwards).

    A seed record whose shipped kernel changed since it was stored is replaced (a store built by an
    older PRAGMA would otherwise keep the old seed); a run's kernel stored for the same problem
    (origin "run", faster than the seed it beat) is kept."""
    col = _collection()
    seeds = seed_records()
    ids = [record_id(s["source"], "kernel") for s in seeds]
    found = col.get(ids=ids, include=["metadatas"])
    stored = dict(zip(found["ids"], found["metadatas"], strict=True))
    for s, rid in zip(seeds, ids, strict=True):
        meta = stored.get(rid)
        if meta is None or (meta.get("origin") == "seed" and meta.get("code") != s["code"]):
            add(
                source=s["source"],
                name=s["name"],
                code=s["code"],
                fmt="kernel",
                speedup=s["speedup"],
                profile_summary=s.get("profile_summary", ""),
                category=s["category"],
                origin="seed",
                collection=col,
            )
    return col


@_serialized
def query(
    source: str, k: int = 2, fmt: str | None = None, category: str | None = None, shipped_only: bool = False
) -> list[dict[str, Any]]:
    """The ``k`` verified kernels whose problems read most like ``source`` (best first), only of
    ``category`` when it is given, only the shipped seeds with ``shipped_only``."""
    col = ensure()
    if col.count() == 0:
        return []
    conditions: list[dict[str, Any]] = [{"format": fmt}] if fmt else []
    conditions += [{"category": category}] if category else []
    conditions += [{"origin": "seed"}] if shipped_only else []
    where = {"$and": conditions} if len(conditions) > 1 else (conditions[0] if conditions else None)
    res = col.query(
        query_texts=[problem_text(source)],
        n_results=min(k, col.count()),
        where=where,
        include=["metadatas", "distances"],
    )
    return [
        {**meta, "id": rid, "distance": float(dist)}
        for rid, meta, dist in zip(res["ids"][0], res["metadatas"][0], res["distances"][0], strict=True)
    ]


@_serialized
def listing() -> list[dict[str, Any]]:
    col = ensure()
    got = col.get(include=["metadatas"])
    rows = [{**meta, "id": rid} for rid, meta in zip(got["ids"], got["metadatas"], strict=True)]
    return sorted(rows, key=lambda r: (r.get("category", ""), r.get("name", "")))


def render(records: list[dict[str, Any]], max_tokens: int) -> str:
    """Prompt section text: each kernel with its problem's forward and speedup, within ``max_tokens``
    (approximate, 3 characters per token); kernels that do not fit are left out whole."""
    parts: list[str] = []
    used = 0
    for r in records:
        forward = problem_text(r.get("source", ""))
        text = (
            f'<verified_kernel name="{r.get("name", "")}" category="{r.get("category", "")}" '
            f'speedup="{float(r.get("speedup", 0.0)):.2f}">\n<for_problem>\n{forward}\n</for_problem>\n'
            f"{r.get('code', '')}\n</verified_kernel>"
        )
        cost = len(text) // 3 + 1
        if used + cost > max_tokens:
            continue
        parts.append(text)
        used += cost
    return "\n".join(parts)
