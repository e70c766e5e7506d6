"""Fetch every registered source, cache the raw pages on disk and split them into segments.

Fetching is all-or-nothing for the store: when a source is unreachable the crawl raises
``CrawlError`` naming each failed source before anything is consolidated or stored (pages already
fetched stay in the raw cache, so a retry does not fetch them again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import warnings
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from pragma.knowledge import paths
from pragma.knowledge.sources import PROFILERS, Profiler, Source

log = logging.getLogger(__name__)

SEGMENT_CHARS = 2500
SEGMENT_OVERLAP_CHARS = 200
COMMAND_TIMEOUT_S = 120.0
URL_TIMEOUT_S = 20


class CrawlError(RuntimeError):
    """One or more sources could not be fetched; nothing downstream ran."""


@dataclass(frozen=True)
class Segment:
    profiler: str
    backend: str
    source: str  # Source.label plus the page (URL) where one source has several
    text: str

    @property
    def sha(self) -> str:
        return hashlib.sha256(f"{self.profiler}\n{self.source}\n{self.text}".encode()).hexdigest()[:20]


class _TextOnly(HTMLParser):
    """Visible text of an HTML page (the stdlib is enough; bs4 is not installed)."""

    SKIP = {"script", "style", "nav", "header", "footer", "noscript"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.depth_skipped = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.SKIP:
            self.depth_skipped += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.depth_skipped:
            self.depth_skipped -= 1
        elif tag in ("p", "div", "li", "tr", "h1", "h2", "h3", "h4", "pre", "dt", "dd"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.depth_skipped:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _TextOnly()
    parser.feed(html)
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _cache_dir(source: Source) -> Path:
    return paths.raw_dir() / hashlib.sha256(source.label.encode()).hexdigest()[:16]


def _loaders() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
        from langchain_community import document_loaders
    return document_loaders


def _fetch_url(source: Source) -> list[Document]:
    loader = _loaders().RecursiveUrlLoader(
        source.target,
        max_depth=source.max_depth,
        extractor=html_to_text,
        timeout=URL_TIMEOUT_S,
        check_response_status=True,
        continue_on_failure=True,
    )
    # The loader logs and skips pages it cannot get; an empty result means the source is unreachable
    # (and CrawlError says so once, so the loader's own warnings are muted).
    loader_log = logging.getLogger(type(loader).__module__)
    level = loader_log.level
    loader_log.setLevel(logging.ERROR)
    try:
        docs = [d for d in loader.load() if d.page_content.strip()]
    finally:
        loader_log.setLevel(level)
    if not docs:
        raise OSError(f"no page could be loaded from {source.target} (offline or unreachable)")
    return docs


def _run_local(source: Source) -> str:
    argv = ["man", "-P", "cat", source.target] if source.kind == "man" else source.target.split()
    env = {"MANWIDTH": "100", "PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise OSError(
            f"`{' '.join(argv)}` exited {proc.returncode}: {(proc.stderr.strip() or 'no output').splitlines()[0][:200]}"
        )
    return proc.stdout


def _load_cached(cache: Path) -> list[Document] | None:
    index = cache / "index.json"
    if not index.is_file():
        return None
    pages = json.loads(index.read_text())
    return [
        Document(
            _loaders().TextLoader(str(cache / p["file"]), encoding="utf-8").load()[0].page_content,
            metadata={"source": p["source"]},
        )
        for p in pages
    ]


def _store_cache(cache: Path, docs: list[Document]) -> None:
    tmp = cache.with_suffix(".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    pages = []
    for i, doc in enumerate(docs):
        (tmp / f"{i:04d}.txt").write_text(doc.page_content, encoding="utf-8")
        pages.append({"file": f"{i:04d}.txt", "source": doc.metadata.get("source", "")})
    (tmp / "index.json").write_text(json.dumps(pages, indent=1))
    shutil.rmtree(cache, ignore_errors=True)
    tmp.rename(cache)  # a cache entry is complete or absent


def fetch(source: Source, refresh: bool = False) -> list[Document]:
    """Pages of one source, from the raw cache when present."""
    cache = _cache_dir(source)
    if not refresh and (cached := _load_cached(cache)) is not None:
        return cached
    if source.kind == "url":
        docs = _fetch_url(source)
    elif source.kind == "file":
        docs = _loaders().TextLoader(source.target, encoding="utf-8").load()
    else:
        docs = [Document(_run_local(source), metadata={"source": source.label})]
    _store_cache(cache, docs)
    return docs


@dataclass
class CrawlResult:
    segments: list[Segment]
    notes: list[str]
    pages: int

    def summary(self) -> dict:
        return {"segments": len(self.segments), "pages": self.pages, "notes": self.notes}


def crawl(profilers: list[Profiler] | None = None, local_only: bool = False, refresh: bool = False) -> CrawlResult:
    """Fetch and split every source of ``profilers`` (default: all registered)."""
    splitter = RecursiveCharacterTextSplitter(chunk_size=SEGMENT_CHARS, chunk_overlap=SEGMENT_OVERLAP_CHARS)
    segments: list[Segment] = []
    notes: list[str] = []
    failures: list[str] = []
    pages = 0
    for prof in profilers or list(PROFILERS.values()):
        for source in prof.local_sources() if local_only else prof.sources:
            if source.requires and shutil.which(source.requires) is None:
                notes.append(f"skipped {source.label}: {source.requires} is not installed")
                continue
            try:
                docs = fetch(source, refresh=refresh)
            except (OSError, subprocess.SubprocessError, UnicodeDecodeError, RuntimeError) as exc:
                if source.optional:
                    notes.append(f"skipped optional {source.label}: {exc}")
                else:
                    failures.append(f"{prof.name} {source.label}: {exc}")
                continue
            pages += len(docs)
            for doc in docs:
                where = doc.metadata.get("source") or source.label
                segments += [
                    Segment(prof.name, prof.backend, where, chunk) for chunk in splitter.split_text(doc.page_content)
                ]
    if failures:
        raise CrawlError(
            f"{len(failures)} source(s) unreachable, nothing was consolidated or stored: "
            + "; ".join(failures)
            + " (use --local-only on a machine without internet)"
        )
    log.info("crawled %d page(s) into %d segment(s)", pages, len(segments))
    return CrawlResult(segments, notes, pages)


def save_segments(result: CrawlResult) -> Path:
    path = paths.knowledge_dir() / "segments.jsonl"
    path.write_text("".join(json.dumps(asdict(s)) + "\n" for s in result.segments))
    return path


def load_segments() -> list[Segment]:
    path = paths.knowledge_dir() / "segments.jsonl"
    if not path.is_file():
        return []
    return [Segment(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
