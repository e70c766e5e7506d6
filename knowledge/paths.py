"""Runtime files of the knowledge store, all under the data directory (outside the repository)."""

from __future__ import annotations

from pathlib import Path

from pragma.graph.context import data_dir


def knowledge_dir() -> Path:
    path = data_dir() / "knowledge"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _sub(name: str) -> Path:
    path = knowledge_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def raw_dir() -> Path:
    """Raw crawled pages, one folder per source."""
    return _sub("raw")


def map_cache_dir() -> Path:
    """One JSON file per summarized segment (keyed by segment hash): what makes consolidation resumable."""
    return _sub("map")


def reduce_cache_dir() -> Path:
    return _sub("reduce")


def chroma_dir() -> Path:
    return _sub("chroma")


def consolidated_path() -> Path:
    """Entries produced by the last successful consolidation (added to the seed at build time)."""
    return knowledge_dir() / "consolidated.json"
