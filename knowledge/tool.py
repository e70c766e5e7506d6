"""The compendium as a LangChain tool the Conductor's model may call while it reasons."""

from __future__ import annotations

from langchain_core.tools import tool

from pragma.knowledge import retrieval

MAX_TOOL_CHARS = 4000


@tool
def lookup_profiler_metric(query: str, backend: str = "") -> str:
    """Explain a profiler metric or find the metrics that diagnose a symptom.

    query: an exact metric name as a profile shows it (e.g. 'LLC-load-misses', 'tma_backend_bound',
    'sm__warps_active.avg.pct_of_peak_sustained_active') or a question in words (e.g. 'loop stalls
    on DRAM bandwidth'). backend: 'cpu' or 'gpu' to restrict the answer, empty for both.
    Returns meaning, measurement, the bottleneck it diagnoses and remedies for the best matches.
    """
    hits = retrieval.find(query, backend=backend or None, k=3)
    if not hits:
        return f"no compendium entry matches {query!r}"
    return "\n\n".join(h.entry.render() for h in hits)[:MAX_TOOL_CHARS]
