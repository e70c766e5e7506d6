"""Content-addressed embedding cache: vector = f(model, document text), so it can be reused.

Embedding the seed takes 10-25 s on a loaded 2-core machine, too slow for building the store on
first use inside a run. The repository therefore ships the seed's vectors
(``data/seed_vectors.npz``) keyed by a hash of model name and text; entries whose text changed (or
crawled entries) are embedded at build time and remembered in the data directory. A stale shipped
file costs time, never correctness, and a test fails until it is regenerated with
``python -m pragma.knowledge.vectors``.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from pragma.knowledge import paths
from pragma.knowledge.embedding import MODEL_NAME

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).parent / "data" / "seed_vectors.npz"


def text_key(text: str) -> str:
    return hashlib.sha256(f"{MODEL_NAME}\n{text}".encode()).hexdigest()[:32]


def _read(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        return {}
    with np.load(path) as data:
        return dict(zip(data["keys"].tolist(), data["vectors"], strict=True))


def _write(path: Path, table: dict[str, np.ndarray]) -> None:
    keys = sorted(table)
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez_compressed(tmp, keys=np.array(keys), vectors=np.stack([table[k] for k in keys]).astype(np.float32))
    tmp.rename(path)


def local_cache_path() -> Path:
    return paths.knowledge_dir() / "vectors.npz"


def embed(texts: list[str], embedding_function: Any, use_cache: bool = True) -> tuple[list[np.ndarray], int]:
    """Vectors for ``texts`` (cache first unless ``use_cache`` is off) and how many were computed."""
    table = {**_read(SHIPPED), **_read(local_cache_path())} if use_cache else {}
    keys = [text_key(t) for t in texts]
    missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in table}.items())
    if missing:
        log.info("embedding %d document(s) not in the vector cache", len(missing))
        fresh = embedding_function([t for _, t in missing])
        local = _read(local_cache_path())
        for (k, _), v in zip(missing, fresh, strict=True):
            table[k] = local[k] = np.asarray(v, dtype=np.float32)
        _write(local_cache_path(), local)
    return [table[k] for k in keys], len(missing)


def write_seed_vectors() -> int:
    """Regenerate the shipped file from the current seed (maintainers run this after editing it)."""
    from pragma.knowledge.embedding import MiniLMEmbeddingFunction
    from pragma.knowledge.seed import load_seed

    texts = [e.render() for e in load_seed()]
    vectors = MiniLMEmbeddingFunction()(texts)
    _write(SHIPPED, {text_key(t): np.asarray(v, dtype=np.float32) for t, v in zip(texts, vectors, strict=True)})
    return len(texts)


def seed_coverage() -> tuple[int, int]:
    """(seed entries, of which the shipped file has vectors)."""
    from pragma.knowledge.seed import load_seed

    shipped = _read(SHIPPED)
    texts = [e.render() for e in load_seed()]
    return len(texts), sum(text_key(t) in shipped for t in texts)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    from pragma.graph.clikit import out

    out.out(f"wrote {write_seed_vectors()} vectors to {SHIPPED}")
