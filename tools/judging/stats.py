"""Timing statistics: medians, minimums and paired bootstrap confidence intervals of speedups.

Samples come from interleaved rounds (one call of each implementation per round), so round i of
the reference and round i of the candidate ran next to each other under the same background load.
The speedup is therefore the median of the per-round ratios ref_i / cand_i, not the ratio of the
two medians: on this shared 2-core machine (load 4.4-5.5) six verifications of the same kernel
spread +-4.3% with per-round ratios against +-8.1% with the ratio of medians (and +-5.9% with the
ratio of minimums). The bootstrap resamples whole rounds and recomputes that median.
"""

from __future__ import annotations

import statistics

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


def ratio_ci(
    numerator_ms: list[float],
    denominator_ms: list[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Bootstrap CI of the median per-round ratio numerator_i / denominator_i.

    A speedup of B over A is ``ratio_ci(a_ms, b_ms)``. Returns (0.0, 0.0) without samples.
    """
    ratios = _paired_ratios(numerator_ms, denominator_ms)
    if ratios.size == 0:
        return 0.0, 0.0
    idx = np.random.default_rng(seed).integers(0, ratios.size, size=(resamples, ratios.size))
    medians = np.median(ratios[idx], axis=1)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def _paired_ratios(numerator_ms: list[float], denominator_ms: list[float]) -> np.ndarray:
    n = min(len(numerator_ms), len(denominator_ms))
    a = np.asarray(numerator_ms[:n], dtype=np.float64)
    b = np.asarray(denominator_ms[:n], dtype=np.float64)
    keep = b > 0
    return a[keep] / b[keep]


def paired_speedup(numerator_ms: list[float], denominator_ms: list[float]) -> float:
    """Median of the per-round ratios (0.0 without samples)."""
    ratios = _paired_ratios(numerator_ms, denominator_ms)
    return float(np.median(ratios)) if ratios.size else 0.0


def summarize(samples_ms: dict[str, list[float]]) -> dict[str, object]:
    """Medians, minimums, speedup over the reference (and over the best, when timed) with CIs."""
    ref, cand = samples_ms.get("reference") or [], samples_ms.get("candidate") or []
    if not ref or not cand:
        return {}
    out: dict[str, object] = {
        "runtime_ms": statistics.median(cand),
        "ref_runtime_ms": statistics.median(ref),
        "runtime_min_ms": min(cand),
        "ref_runtime_min_ms": min(ref),
        "speedup": paired_speedup(ref, cand),
        "speedup_ci": list(ratio_ci(ref, cand)),
        "speedup_of_minimums": min(ref) / min(cand) if min(cand) > 0 else 0.0,
    }
    best = samples_ms.get("best") or []
    if best:
        out.update(
            best_runtime_ms=statistics.median(best),
            speedup_vs_best=paired_speedup(best, cand),
            speedup_vs_best_ci=list(ratio_ci(best, cand)),
        )
    return out


def spread_pct(values: list[float]) -> float:
    """Half the range as a percentage of the median: the "within +-x%" figure of a repeat run."""
    if not values:
        return 0.0
    mid = statistics.median(values)
    return (max(values) - min(values)) / 2 / mid * 100 if mid else 0.0
