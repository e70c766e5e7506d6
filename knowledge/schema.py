"""The compendium's one schema, shared by the seed, the LLM consolidation and the store.

An entry explains one metric of one tool: what it means, how it is measured, which bottleneck
class it reveals (the profilers' shared vocabulary) and what to do about it.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from pragma.tools.profilers.bottleneck import VOCABULARY

Backend = Literal["cpu", "gpu", "any"]  # "any": backend-neutral terms (roofline) match both


def metric_key(name: str) -> str:
    """Spelling-insensitive key: 'L1-dcache-load-misses', 'l1_dcache load misses' -> 'l1_dcache_load_misses'."""
    return re.sub(r"[^a-z0-9%]+", "_", name.lower()).strip("_")


class MetricEntry(BaseModel):
    metric: str = Field(
        description="Name as the tool reports it, e.g. 'cycles' or 'sm__throughput.avg.pct_of_peak_sustained_elapsed'."
    )
    tool: str = Field(
        description="Producing tool: perf, perf-topdown, callgrind, gcc-vectorization, objdump, roofline, hardware, wall-clock, ncu."
    )
    backend: Backend = "cpu"
    aliases: list[str] = Field(default_factory=list, description="Other names engineers and tools use.")
    unit: str = ""
    meaning: str = Field(description="What the number is, in plain words.")
    measurement: str = Field(default="", description="How the tool obtains it and its caveats.")
    bottlenecks: list[str] = Field(
        default_factory=list, description="Bottleneck classes it diagnoses (shared vocabulary)."
    )
    diagnosis: str = Field(default="", description="How to read it: thresholds and what high/low values point to.")
    remedies: list[str] = Field(default_factory=list, description="Code changes that move it in the right direction.")

    @field_validator("bottlenecks")
    @classmethod
    def _known_classes(cls, value: list[str]) -> list[str]:
        # Unknown labels from an LLM are dropped rather than failing the whole entry.
        return [v for v in value if v in VOCABULARY] or ["unknown"]

    @property
    def entry_id(self) -> str:
        return f"{self.backend}:{self.tool}:{metric_key(self.metric)}"

    def keys(self) -> list[str]:
        """Every spelling an exact lookup should accept."""
        return sorted({metric_key(n) for n in [self.metric, *self.aliases] if metric_key(n)})

    def render(self) -> str:
        """Prompt and embedding text: compact, labelled, no markup."""
        names = f" (also: {', '.join(self.aliases)})" if self.aliases else ""
        lines = [
            f"{self.metric} [{self.tool}, {self.backend}{', ' + self.unit if self.unit else ''}]{names}",
            f"Meaning: {self.meaning}",
        ]
        if self.measurement:
            lines.append(f"Measured: {self.measurement}")
        lines.append(f"Diagnoses: {', '.join(self.bottlenecks)}. {self.diagnosis}".rstrip())
        if self.remedies:
            lines.append("Remedies: " + "; ".join(r.rstrip(".") for r in self.remedies) + ".")
        return "\n".join(lines)

    def brief(self, remedies: int = 2) -> str:
        """Shorter form for the Conductor's prompt, where many entries share a small budget."""
        text = f"- {self.metric} [{self.tool}]: {self.meaning} {self.diagnosis}".rstrip()
        if self.remedies:
            text += " Remedies: " + "; ".join(r.rstrip(".") for r in self.remedies[:remedies]) + "."
        return text


class SegmentSummary(BaseModel):
    """What the map step's LLM returns for one documentation segment (may hold no metric at all)."""

    entries: list[MetricEntry] = Field(default_factory=list)
