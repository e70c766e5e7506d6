"""The curated seed compendium shipped in the repository (knowledge/data/seed/*.yaml).

Written by hand in our own words, in the same schema as the consolidated entries, so a fresh
offline machine without an LLM still gets a useful store.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import yaml

from pragma.knowledge.schema import MetricEntry

SEED_DIR = Path(__file__).parent / "data" / "seed"


class SeedError(ValueError):
    pass


@lru_cache(maxsize=1)
def _load(dir_str: str) -> tuple[MetricEntry, ...]:
    entries: list[MetricEntry] = []
    for path in sorted(Path(dir_str).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text()) or {}
        defaults = {k: doc[k] for k in ("tool", "backend") if k in doc}
        for raw in doc.get("entries", []):
            try:
                entries.append(MetricEntry.model_validate({**defaults, **raw}))
            except ValueError as exc:
                raise SeedError(f"{path.name}: entry {raw.get('metric', '?')!r}: {exc}") from None
    seen: set[str] = set()
    for e in entries:
        if e.entry_id in seen:
            raise SeedError(f"duplicate seed entry {e.entry_id}")
        seen.add(e.entry_id)
    return tuple(entries)


def load_seed(seed_dir: Path = SEED_DIR) -> list[MetricEntry]:
    return list(_load(str(seed_dir)))


def content_sha(entries: list[MetricEntry]) -> str:
    """Identity of a set of entries: the store is rebuilt when it changes."""
    blob = json.dumps([e.model_dump() for e in entries], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
