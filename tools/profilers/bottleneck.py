"""One bottleneck vocabulary shared by every profiler (CPU now, GPU later)."""

from __future__ import annotations

from typing import Any, Literal

Bottleneck = Literal[
    "memory-bound", "compute-bound", "latency/overhead-bound", "not-vectorized", "poor-locality",
    "bad-speculation", "frontend-bound", "unknown",
]
VOCABULARY: tuple[str, ...] = Bottleneck.__args__  # type: ignore[attr-defined]

OVERHEAD_PER_CALL_MS = 0.05  # below this, Python/ctypes call overhead dominates a CPU kernel


def classify_cpu(metrics: dict[str, dict[str, Any]], vect: dict[str, Any] | None,
                 mix: dict[str, Any] | None) -> tuple[str, str]:
    """Best label the available evidence supports, and the evidence in words."""
    per_call = metrics.get("per_call_ms", {}).get("value")
    if per_call is not None and per_call < OVERHEAD_PER_CALL_MS:
        return "latency/overhead-bound", f"{per_call * 1e3:.1f} us per call: call overhead dominates"
    misses = metrics.get("branch-misses", {}).get("value")
    branches = metrics.get("branches", {}).get("value")
    if misses and branches and misses / branches > 0.05:
        return "bad-speculation", f"{100 * misses / branches:.1f}% of branches mispredicted"
    if vect and vect.get("loops") and vect["vectorized_loops"] == 0:
        return "not-vectorized", "the compiler vectorized none of the kernel's loops"
    if mix and mix.get("scalar_fp", 0) > 0 and mix.get("packed_fp", 0) == 0:
        return "not-vectorized", "the built kernel contains scalar FP instructions only"
    return "unknown", "no roofline or counter evidence yet to separate memory- from compute-bound"
