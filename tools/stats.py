"""Timing statistics: medians, minimums and paired bootstrap confidence intervals of speedups.

Samples come from interleaved rounds (one call of each implementation per round), so round i of
the reference and round i of the candidate saw the same background load. The bootstrap resamples
whole rounds, keeping that pairing, and recomputes the ratio of medians each time.
"""

from __future__ import annotations

import statistics

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


def ratio_ci(numerator_ms: list[float], denominator_ms: list[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
             confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """Bootstrap CI of median(numerator) / median(denominator), resampling paired rounds.

    A speedup of B over A is ``ratio_ci(a_ms, b_ms)``. Returns (0.0, 0.0) without samples.
    """
    a = np.asarray(numerator_ms, dtype=np.float64)
    b = np.asarray(denominator_ms, dtype=np.float64)
    n = min(len(a), len(b))
    if n == 0:
        return 0.0, 0.0
    a, b = a[:n], b[:n]
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    den = np.median(b[idx], axis=1)
    ratios = np.median(a[idx], axis=1) / np.where(den > 0, den, np.nan)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return 0.0, 0.0
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def summarize(samples_ms: dict[str, list[float]]) -> dict[str, object]:
    """Medians, minimums, speedup over the reference (and over the best, when timed) with CIs."""
    ref, cand = samples_ms.get("reference") or [], samples_ms.get("candidate") or []
    if not ref or not cand:
        return {}
    ref_med, cand_med = statistics.median(ref), statistics.median(cand)
    out: dict[str, object] = {
        "runtime_ms": cand_med, "ref_runtime_ms": ref_med,
        "runtime_min_ms": min(cand), "ref_runtime_min_ms": min(ref),
        "speedup": ref_med / cand_med if cand_med > 0 else 0.0,
        "speedup_ci": list(ratio_ci(ref, cand)),
    }
    best = samples_ms.get("best") or []
    if best:
        best_med = statistics.median(best)
        out.update(best_runtime_ms=best_med, speedup_vs_best=best_med / cand_med if cand_med > 0 else 0.0,
                   speedup_vs_best_ci=list(ratio_ci(best, cand)))
    return out


def spread_pct(values: list[float]) -> float:
    """Half the range as a percentage of the median: the "within +-x%" figure of a repeat run."""
    if not values:
        return 0.0
    mid = statistics.median(values)
    return (max(values) - min(values)) / 2 / mid * 100 if mid else 0.0
