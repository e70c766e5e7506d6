"""The Chroma store: one persistent collection of compendium entries in the data directory.

Records: id ``backend:tool:metric_key``, document = the entry's rendered text (what is embedded),
metadata = metric, tool, backend, bottleneck classes, every accepted spelling of the name (for
exact lookup), origin (seed or crawl) and the entry itself as JSON (so results need no second
source). A build writes a fresh collection and swaps it in under a file lock, so readers see the
old store or the new one, never a half-written one.
"""

from __future__ import annotations

import fcntl
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pragma.knowledge import paths
from pragma.knowledge.schema import MetricEntry

log = logging.getLogger(__name__)

COLLECTION = "pragma_compendium"
BUILDING = COLLECTION + "_building"
ADD_BATCH = 64


@dataclass
class BuildReport:
    entries: int
    seed_entries: int
    crawled_entries: int
    build_s: float
    content_sha: str
    embedded_now: int = 0  # documents not found in the vector cache (the slow part of a build)


def client() -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(paths.chroma_dir()), settings=Settings(anonymized_telemetry=False))


def embedding_function() -> Any:
    from pragma.knowledge.embedding import MiniLMEmbeddingFunction

    return MiniLMEmbeddingFunction()


@contextmanager
def build_lock() -> Iterator[None]:
    with open(paths.knowledge_dir() / "build.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def open_collection() -> Any | None:
    """The built collection, or None when there is none yet."""
    try:
        return client().get_collection(COLLECTION, embedding_function=embedding_function())
    except Exception as exc:  # chromadb raises NotFoundError (or ValueError in older releases)
        if "does not exist" in str(exc) or type(exc).__name__ == "NotFoundError":
            return None
        raise


def _metadata(entry: MetricEntry, origin: str) -> dict[str, Any]:
    return {
        "metric": entry.metric,
        "tool": entry.tool,
        "backend": entry.backend,
        "bottlenecks": entry.bottlenecks,
        "primary_bottleneck": entry.bottlenecks[0],
        "metric_keys": entry.keys(),
        "origin": origin,
        "entry_json": entry.model_dump_json(),
    }


def merged_entries(seed: list[MetricEntry], crawled: list[MetricEntry]) -> list[tuple[MetricEntry, str]]:
    """Seed entries win over crawled ones with the same id: they are curated."""
    out = {e.entry_id: (e, "seed") for e in seed}
    for e in crawled:
        out.setdefault(e.entry_id, (e, "crawl"))
    return list(out.values())


def build(
    seed: list[MetricEntry], crawled: list[MetricEntry] | None = None, use_vector_cache: bool = True
) -> BuildReport:
    with build_lock():
        return _build_locked(seed, crawled or [], use_vector_cache)


def _build_locked(seed: list[MetricEntry], crawled: list[MetricEntry], use_vector_cache: bool = True) -> BuildReport:
    from pragma.knowledge import vectors
    from pragma.knowledge.seed import content_sha

    start = time.monotonic()
    records = merged_entries(seed, crawled)
    sha = content_sha([e for e, _ in records])
    ef = embedding_function()
    documents = [e.render() for e, _ in records]
    embeddings, embedded_now = vectors.embed(documents, ef, use_cache=use_vector_cache)
    db = client()
    if BUILDING in [c.name for c in db.list_collections()]:
        db.delete_collection(BUILDING)  # left by an interrupted build
    col = db.create_collection(
        BUILDING,
        embedding_function=ef,
        configuration={"hnsw": {"space": "cosine"}},
        metadata={"content_sha": sha, "entries": len(records)},
    )
    for i in range(0, len(records), ADD_BATCH):
        chunk = records[i : i + ADD_BATCH]
        col.add(
            ids=[e.entry_id for e, _ in chunk],
            documents=documents[i : i + ADD_BATCH],
            embeddings=embeddings[i : i + ADD_BATCH],
            metadatas=[_metadata(e, origin) for e, origin in chunk],
        )
    if COLLECTION in [c.name for c in db.list_collections()]:
        db.delete_collection(COLLECTION)
    col.modify(name=COLLECTION)
    report = BuildReport(
        len(records),
        sum(o == "seed" for _, o in records),
        sum(o == "crawl" for _, o in records),
        time.monotonic() - start,
        sha,
        embedded_now,
    )
    log.info("knowledge store built: %d entries in %.1f s", report.entries, report.build_s)
    return report


def expected_entries() -> tuple[list[MetricEntry], list[MetricEntry]]:
    from pragma.knowledge.consolidate import load_consolidated
    from pragma.knowledge.seed import load_seed

    return load_seed(), load_consolidated()


def ensure_store() -> tuple[Any, BuildReport | None]:
    """The collection, (re)built from the seed and the last consolidation when missing or stale."""
    from pragma.knowledge.seed import content_sha

    seed, crawled = expected_entries()
    sha = content_sha([e for e, _ in merged_entries(seed, crawled)])
    col = open_collection()
    if col is not None and (col.metadata or {}).get("content_sha") == sha:
        return col, None
    with build_lock():  # another process may have built it while we waited
        col = open_collection()
        if col is not None and (col.metadata or {}).get("content_sha") == sha:
            return col, None
        report = _build_locked(seed, crawled)
    return open_collection(), report


def entry_of(metadata: dict[str, Any]) -> MetricEntry:
    return MetricEntry.model_validate(json.loads(metadata["entry_json"]))


def status() -> str | None:
    """One line for `pragma doctor`: what the store holds, or None when it is not built yet."""
    col = open_collection()
    if col is None:
        return None
    meta = col.metadata or {}
    return f"{col.count()} entries (content {meta.get('content_sha', '?')}) at {paths.chroma_dir()}"
