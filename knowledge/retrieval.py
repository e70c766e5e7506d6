"""Retrieval: exact lookup by metric name, semantic search filtered by backend and bottleneck,
and the bounded knowledge section of the Conductor's prompt.

Exact lookups and bottleneck filters run over an in-memory index of the store's entries (a few
hundred records; no embedding needed). Semantic search asks Chroma, which embeds the query.
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass
from typing import Any

from pragma.knowledge import store
from pragma.knowledge.schema import MetricEntry, metric_key

log = logging.getLogger(__name__)

BOTTLENECK_EXTRAS = 3
TOKEN = re.compile(r"[A-Za-z0-9_.%\-]+")


def identifiers(text: str) -> list[str]:
    """Tokens that look like metric identifiers (D1mr, IPC, tma_retiring, L1-dcache-load-misses,
    sm__throughput...), as opposed to plain words that merely equal a metric name ("cycles")."""
    out = []
    for tok in TOKEN.findall(text):
        tok = tok.strip(".-")
        if any(c.isdigit() or c in "_." for c in tok) or "-" in tok or any(c.isupper() for c in tok[1:]):
            out.append(tok)
    return out


@dataclass
class Hit:
    entry: MetricEntry
    score: float  # 1.0 for exact matches, cosine similarity for semantic ones
    how: str  # "exact" | "semantic"


class EntryIndex:
    """Entries by every accepted spelling of their name, and by bottleneck class."""

    def __init__(self, entries: list[MetricEntry]):
        self.entries = entries
        self.by_key: dict[str, list[MetricEntry]] = {}
        for e in entries:
            for k in e.keys():
                self.by_key.setdefault(k, []).append(e)

    def lookup(self, name: str, backend: str | None = None, fuzzy: bool = False) -> list[MetricEntry]:
        key = metric_key(name)
        found = self.by_key.get(key, [])
        if not found and fuzzy:
            close = difflib.get_close_matches(key, list(self.by_key), n=1, cutoff=0.85)
            found = self.by_key[close[0]] if close else []
        # An entry named exactly so beats one that only lists it as an alias.
        ranked = sorted(found, key=lambda e: metric_key(e.metric) != key)
        return [e for e in ranked if _backend_ok(e, backend)]

    def by_bottleneck(self, label: str, backend: str | None = None, primary_only: bool = True) -> list[MetricEntry]:
        return [
            e
            for e in self.entries
            if _backend_ok(e, backend) and ((e.bottlenecks[0] == label) if primary_only else label in e.bottlenecks)
        ]


def _backend_ok(entry: MetricEntry, backend: str | None) -> bool:
    return not backend or entry.backend in (backend, "any")


_INDEX: dict[str, EntryIndex] = {}


def load_index() -> tuple[EntryIndex, Any, str]:
    """(index, collection or None, note). Falls back to the seed alone when the store cannot be
    opened or built, and says so in the note."""
    try:
        col, report = store.ensure_store()
    except Exception as exc:  # embedding model missing, chroma error: degrade, never fail a run
        from pragma.knowledge.seed import load_seed

        note = f"knowledge store unavailable ({str(exc)[:160]}); using the seed compendium without semantic search"
        log.warning(note)
        return EntryIndex(load_seed()), None, note
    sha = (col.metadata or {}).get("content_sha", "")
    if sha not in _INDEX:
        got = col.get(include=["metadatas"])
        _INDEX.clear()
        _INDEX[sha] = EntryIndex([store.entry_of(m) for m in got["metadatas"]])
    note = f"knowledge store built on first use in {report.build_s:.1f} s" if report else ""
    return _INDEX[sha], col, note


def _where(backend: str | None, bottleneck: str | None) -> dict[str, Any] | None:
    clauses: list[dict[str, Any]] = []
    if backend:
        clauses.append({"backend": {"$in": [backend, "any"]}})
    if bottleneck:
        clauses.append({"bottlenecks": {"$contains": bottleneck}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def search(
    text: str, backend: str | None = None, bottleneck: str | None = None, k: int = 5, collection: Any = None
) -> list[Hit]:
    """Semantic search over the store (embeds ``text``)."""
    col = collection if collection is not None else store.ensure_store()[0]
    res = col.query(
        query_texts=[text], n_results=k, where=_where(backend, bottleneck), include=["metadatas", "distances"]
    )
    return [
        Hit(store.entry_of(m), 1.0 - d, "semantic")
        for m, d in zip(res["metadatas"][0], res["distances"][0], strict=True)
    ]


def find(query: str, backend: str | None = None, bottleneck: str | None = None, k: int = 3) -> list[Hit]:
    """Exact matches for identifier-like names in ``query`` first, then semantic results."""
    index, col, _ = load_index()
    hits: list[Hit] = []
    names = [query.strip()] + identifiers(query)
    for name in names:
        for e in index.lookup(name, backend):
            if bottleneck is None or bottleneck in e.bottlenecks:
                hits.append(Hit(e, 1.0, "exact"))
    if col is not None:
        hits += search(query, backend, bottleneck, k=k + len(hits), collection=col)
    seen: set[str] = set()
    unique = [h for h in hits if not (h.entry.entry_id in seen or seen.add(h.entry.entry_id))]
    return unique[:k]


def context_for_profile(profiles: list[dict[str, Any]], backend: str, max_chars: int) -> str:
    """Knowledge section for the Conductor: entries for the metrics the profiles hold, led by
    those that bear on the diagnosed bottleneck, then what else diagnoses it; at most ``max_chars``."""
    names: list[str] = []
    labels: list[str] = []
    for p in profiles:
        if p.get("status") != "ok":
            continue
        names += [n for n in p.get("metrics", {}) if n not in names]
        if p.get("bottleneck") not in (None, "unknown") and p["bottleneck"] not in labels:
            labels.append(p["bottleneck"])
    if max_chars <= 0 or not (names or labels):
        return ""  # nothing profiled (e.g. the no-profile agent mode): no store access at all
    index, _, note = load_index()
    if note:
        log.info(note)  # how the store was obtained is for the logs, not for the model
    present: list[MetricEntry] = []
    for n in names:
        present += index.lookup(n, backend, fuzzy=True)[:1]
    related = [e for e in present if set(e.bottlenecks) & set(labels)]
    # A few entries that diagnose the label but are not in the profile: candidates for extra_metrics.
    others = [e for label in labels for e in index.by_bottleneck(label, backend) if e not in present]
    ordered: list[MetricEntry] = []
    for e in related + others[:BOTTLENECK_EXTRAS] + present:
        if e not in ordered:
            ordered.append(e)
    lines = [f"Diagnosed bottleneck: {', '.join(labels)}."] if labels else []
    used = sum(len(x) + 1 for x in lines)
    skipped: list[str] = []
    for e in ordered:
        text = e.brief()
        if used + len(text) + 1 > max_chars - 200:  # room for the closing line
            skipped.append(e.metric)
            continue
        lines.append(text)
        used += len(text) + 1
    if skipped:
        lines.append(
            f"(left out for space: {', '.join(skipped)}"[:180] + "; lookup_profiler_metric explains any metric)"
        )
    return "\n".join(lines)
