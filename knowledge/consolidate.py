"""LLM consolidation: map (one summary per segment) then reduce (merge and standardize).

Both steps cache every successful reply on disk under a hash of what was asked, so an interrupted
or failed consolidation resumes where it stopped and a rerun over unchanged segments costs nothing.
Token usage is counted per step and reported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import ValidationError

from pragma.knowledge import paths, prompts
from pragma.knowledge.crawler import Segment
from pragma.knowledge.schema import MetricEntry, SegmentSummary, metric_key
from pragma.nodes import llm
from pragma.tools.profilers.bottleneck import VOCABULARY

log = logging.getLogger(__name__)

PROMPT_VERSION = "1"  # bump when the prompts change: old cached replies no longer apply
REDUCE_BATCH_ENTRIES = 24
JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


class ConsolidationError(RuntimeError):
    """The LLM endpoint failed mid-way; finished steps are cached and a rerun resumes."""


@dataclass
class Costs:
    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, usage: dict[str, float]) -> None:
        self.calls += 1
        self.input_tokens += int(usage.get("input_tokens", 0))
        self.output_tokens += int(usage.get("output_tokens", 0))


@dataclass
class ConsolidationReport:
    entries: list[MetricEntry]
    map_costs: Costs = field(default_factory=Costs)
    reduce_costs: Costs = field(default_factory=Costs)
    unparsed: list[str] = field(default_factory=list)  # step ids whose reply held no valid JSON

    def summary(self) -> dict[str, Any]:
        def costs(c: Costs) -> dict[str, int]:
            return {
                "llm_calls": c.calls,
                "cached": c.cached,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
            }

        return {
            "entries": len(self.entries),
            "map": costs(self.map_costs),
            "reduce": costs(self.reduce_costs),
            "total_tokens": sum(c.input_tokens + c.output_tokens for c in (self.map_costs, self.reduce_costs)),
            "unparsed_replies": self.unparsed,
        }


def parse_entries(text: str) -> list[MetricEntry] | None:
    """Entries from a reply (a ```json block or bare JSON); None when there is no valid JSON."""
    for candidate in [m.group(1) for m in JSON_BLOCK.finditer(text)] + [text.strip()]:
        try:
            return SegmentSummary.model_validate(json.loads(candidate)).entries
        except (ValueError, ValidationError):
            continue
    return None


def _sha(*parts: str) -> str:
    return hashlib.sha256("\n\x00".join((PROMPT_VERSION, *parts)).encode()).hexdigest()[:24]


Asker = Callable[[str, str], tuple[str, dict[str, float]]]


def make_asker(spec: str, timeout_s: float) -> Asker:
    """One chat call through the project's LLM seam; returns (text, usage)."""
    model = llm.load_chat_model(spec, role="knowledge", timeout_s=timeout_s)

    def ask(system: str, human: str) -> tuple[str, dict[str, float]]:
        try:
            reply = model.invoke([SystemMessage(system), HumanMessage(human)])
        except Exception as exc:  # network, auth, server errors: all stop the run the same way
            raise ConsolidationError(
                f"LLM call failed ({type(exc).__name__}: {str(exc)[:200]}); finished steps are cached, rerun to resume"
            ) from exc
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
        return text, llm.usage_of(reply, "knowledge")

    return ask


def _cached_step(
    cache: Path, step_id: str, ask: Asker, system: str, human: str, costs: Costs, report: ConsolidationReport
) -> list[MetricEntry]:
    path = cache / f"{step_id}.json"
    if path.is_file():
        costs.cached += 1
        return [MetricEntry.model_validate(e) for e in json.loads(path.read_text())["entries"]]
    text, usage = ask(system, human)
    costs.add(usage)
    entries = parse_entries(text)
    if entries is None:
        # Not cached: a rerun (perhaps with a better model) tries this step again.
        report.unparsed.append(step_id)
        log.warning("step %s: reply held no valid JSON entries", step_id)
        return []
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"entries": [e.model_dump() for e in entries], "usage": usage}))
    tmp.rename(path)
    return entries


def map_segments(segments: list[Segment], ask: Asker, report: ConsolidationReport) -> list[MetricEntry]:
    system = prompts.MAP_SYSTEM.format(vocabulary=", ".join(VOCABULARY))
    drafts: list[MetricEntry] = []
    for i, seg in enumerate(segments):
        human = prompts.MAP_HUMAN.format(profiler=seg.profiler, backend=seg.backend, source=seg.source, text=seg.text)
        found = _cached_step(paths.map_cache_dir(), _sha("map", seg.sha), ask, system, human, report.map_costs, report)
        # The segment's registry entry is authoritative for tool and backend.
        drafts += [e.model_copy(update={"tool": seg.profiler, "backend": seg.backend}) for e in found]
        log.info("map %d/%d: %d entr(ies)", i + 1, len(segments), len(found))
    return drafts


def reduce_batches(drafts: list[MetricEntry]) -> list[list[MetricEntry]]:
    """Drafts of the same metric always share a batch; batches follow bottleneck classes so
    related metrics of different tools are standardized together."""
    groups: dict[tuple[str, str], list[MetricEntry]] = {}
    for d in drafts:
        groups.setdefault((d.backend, metric_key(d.metric)), []).append(d)
    ordered = sorted(groups.values(), key=lambda g: (g[0].bottlenecks[0], g[0].backend, metric_key(g[0].metric)))
    batches: list[list[MetricEntry]] = []
    for group in ordered:
        if batches and len(batches[-1]) + len(group) <= REDUCE_BATCH_ENTRIES:
            batches[-1].extend(group)
        else:
            batches.append(list(group))
    return batches


def reduce_drafts(drafts: list[MetricEntry], ask: Asker, report: ConsolidationReport) -> list[MetricEntry]:
    system = prompts.REDUCE_SYSTEM.format(vocabulary=", ".join(VOCABULARY))
    merged: dict[str, MetricEntry] = {}
    for batch in reduce_batches(drafts):
        body = "\n".join(json.dumps(d.model_dump(), sort_keys=True) for d in batch)
        human = prompts.REDUCE_HUMAN.format(count=len(batch), drafts=body)
        for entry in _cached_step(
            paths.reduce_cache_dir(), _sha("reduce", body), ask, system, human, report.reduce_costs, report
        ):
            merged.setdefault(entry.entry_id, entry)
    return list(merged.values())


def consolidate(segments: list[Segment], ask: Asker) -> ConsolidationReport:
    report = ConsolidationReport(entries=[])
    drafts = map_segments(segments, ask, report)
    report.entries = reduce_drafts(drafts, ask, report) if drafts else []
    return report


def save_consolidated(entries: list[MetricEntry]) -> Path:
    path = paths.consolidated_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([e.model_dump() for e in entries], indent=1))
    tmp.rename(path)
    return path


def load_consolidated() -> list[MetricEntry]:
    path = paths.consolidated_path()
    if not path.is_file():
        return []
    return [MetricEntry.model_validate(e) for e in json.loads(path.read_text())]
