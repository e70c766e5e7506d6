"""Evaluation metrics over problem outcomes (pure functions; unit-tested on hand-computed values).

Conventions (stated in every report):
- A problem is *solved* by a mode when its run produced an accepted best kernel: verified correct
  (including the held-out re-check) and accepted by the verifier. Its *speedup* is that best's
  speedup over eager PyTorch (median time ratio, same process, interleaved).
- Every problem x mode of a run is counted. Only a *finished* job with an accepted best is solved:
  a job that crashed (error), was killed at its time budget (even one that kept an accepted best),
  was interrupted, or is still pending or running counts as unsolved, at 1.0x in the all-problems
  figures (``counts_as_solved``).
- success rate = solved / problems (failed, crashed, over-budget and unfinished count as unsolved).
- fast_p = fraction of all problems solved with speedup > p (KernelBench's fast_p); fast_0 is the
  success rate.
- Speedup means are given two ways: over solved problems only (the paper's "speedup", what a
  correct kernel buys) and over all problems with unsolved ones counted as 1.0x (the user keeps
  PyTorch when the agent fails). Geometric means and medians likewise; "n/a" when nothing is solved.
- cost per solved problem = all tokens (or USD) the mode spent on the whole suite / problems solved.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

FAST_THRESHOLDS = (0.0, 1.0, 1.2, 2.0)


@dataclass(frozen=True)
class Outcome:
    problem: str
    category: str
    mode: str
    solved: bool
    speedup: float  # the best's speedup; ignored when not solved
    tokens: float = 0.0
    cost_usd: float = 0.0
    iterations: int = 0
    llm_calls: float = 0.0
    wall_s: float = 0.0  # the job's wall time (every search policy pays its own)
    tune_s: float = 0.0  # seconds the tuner spent (nodes/tune.py; no LLM call), part of wall_s


def counts_as_solved(status: str, solved: bool) -> bool:
    """Whether a job's result counts as solved in every figure: finished with an accepted best."""
    return status == "finished" and bool(solved)


def outcomes(rows: list[dict[str, Any]], problems: list[tuple[str, str]], modes: list[str]) -> list[Outcome]:
    """One Outcome per problem x mode of a run, whatever its job's status.

    ``rows``: eval_problems rows (problem, mode, category, status, solved, best_speedup, tokens...);
    ``problems``: (name, category) of every problem of the run; ``modes``: every mode of the run.
    A problem x mode without a row (never recorded) is an unsolved outcome like any other."""
    by_key = {(r["problem"], r["mode"]): r for r in rows}
    found = []
    for name, category in problems:
        for mode in modes:
            r = by_key.get((name, mode))
            if r is None:
                found.append(Outcome(problem=name, category=category, mode=mode, solved=False, speedup=1.0))
                continue
            solved = counts_as_solved(r["status"], bool(r["solved"]))
            found.append(
                Outcome(
                    problem=name,
                    category=category,
                    mode=mode,
                    solved=solved,
                    speedup=float(r["best_speedup"] or 0.0) if solved else 1.0,
                    tokens=float(r.get("input_tokens") or 0.0) + float(r.get("output_tokens") or 0.0),
                    cost_usd=float(r.get("cost_usd") or 0.0),
                    iterations=int(r.get("iterations") or 0),
                    llm_calls=float(r.get("llm_calls") or 0.0),
                    wall_s=float(r.get("wall_s") or 0.0),
                    tune_s=float(r.get("tune_s") or 0.0),
                )
            )
    return found


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "geomean": None, "median": None}
    return {"mean": sum(values) / len(values), "geomean": geomean(values), "median": statistics.median(values)}


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    solved = [o for o in outcomes if o.solved]
    solved_speedups = [o.speedup for o in solved]
    all_speedups = [o.speedup if o.solved else 1.0 for o in outcomes]
    tokens = sum(o.tokens for o in outcomes)
    cost = sum(o.cost_usd for o in outcomes)
    return {
        "problems": n,
        "solved": len(solved),
        "success_rate": len(solved) / n if n else 0.0,
        "fast": {p: (sum(1 for o in solved if o.speedup > p) / n if n else 0.0) for p in FAST_THRESHOLDS},
        "speedup_solved": _stats(solved_speedups),
        "speedup_all": _stats(all_speedups),
        "tokens": tokens,
        "cost_usd": cost,
        "tokens_per_solved": tokens / len(solved) if solved else None,
        # What a mode spent per problem: the equal-budget comparison of search policies reads these.
        "llm_calls_per_problem": sum(o.llm_calls for o in outcomes) / n if n else None,
        "candidates_per_problem": sum(o.iterations for o in outcomes) / n if n else None,
        "wall_s_per_problem": sum(o.wall_s for o in outcomes) / n if n else None,
        "tune_s_per_problem": sum(o.tune_s for o in outcomes) / n if n else None,
        "cost_per_solved_usd": cost / len(solved) if solved else None,
    }


def by_key(outcomes: list[Outcome], key: str) -> dict[str, list[Outcome]]:
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(getattr(o, key), []).append(o)
    return groups


def by_mode_and_category(outcomes: list[Outcome]) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        mode: {cat: summarize(group) for cat, group in sorted(by_key(rows, "category").items())}
        for mode, rows in by_key(outcomes, "mode").items()
    }


def best_so_far(attempts: list[dict[str, Any]], max_iterations: int) -> dict[str, list[float]]:
    """Per problem, the historical best's speedup after each attempt (0.0 while there is none).

    ``attempts``: rows with problem, iteration, status, speedup and ``accepted`` (the verifier's
    new-best decision, None where it made none), for one mode. An accepted attempt becomes the
    best (so the curve ends at the run's final best); without decisions the fastest correct one
    does. A run that stopped early keeps its last value for the remaining iterations.
    """
    curves: dict[str, list[float]] = {}
    for problem in sorted({a["problem"] for a in attempts}):
        rows = {int(a["iteration"]): a for a in attempts if a["problem"] == problem}
        best, curve = 0.0, []
        for i in range(1, max_iterations + 1):
            a = rows.get(i)
            if a is not None and a["status"] == "ok":
                accepted = a.get("accepted")
                if accepted is None:
                    best = max(best, float(a["speedup"]))
                elif accepted:
                    best = float(a["speedup"])
            curve.append(best)
        curves[problem] = curve
    return curves


def sequential_summary(attempts: list[dict[str, Any]]) -> dict[str, int]:
    """How the verifier's sequential acceptance test went, over one mode's attempts.

    ``head_to_head``: correct attempts timed against a best (an attempt accepted earlier in the
    same problem); ``straddled``: of those, the ones whose CI against the best straddled the
    acceptance bar after the first batch, so more batches were timed; ``decided``: the extra
    batches settled it (``accepted`` + ``rejected``); ``undecided``: still straddling at the
    budget's end (not accepted). Rows from a database older than these columns count as not
    straddled.
    """
    out = {"head_to_head": 0, "straddled": 0, "decided": 0, "accepted": 0, "rejected": 0, "undecided": 0}
    for problem in sorted({a["problem"] for a in attempts}):
        has_best = False
        for a in sorted((a for a in attempts if a["problem"] == problem), key=lambda a: int(a["iteration"])):
            if a["status"] == "ok" and has_best:
                out["head_to_head"] += 1
                if int(a.get("extra_batches") or 0) > 0:
                    out["straddled"] += 1
                    if a.get("decision_changed"):
                        out["decided"] += 1
                        out["accepted" if a.get("accepted") else "rejected"] += 1
                    else:
                        out["undecided"] += 1
            has_best = has_best or bool(a.get("accepted"))
    return out


def curve_summary(curves: dict[str, list[float]], n_problems: int) -> dict[str, list[float]]:
    """Across problems, per iteration: fraction solved so far and geomean speedup (unsolved = 1.0x).

    ``n_problems`` counts problems without any recorded attempt too (they stay unsolved).
    """
    length = max((len(c) for c in curves.values()), default=0)
    solved, geo = [], []
    for i in range(length):
        values = [c[i] for c in curves.values()]
        solved.append(sum(1 for v in values if v > 0) / n_problems if n_problems else 0.0)
        padded = [v if v > 0 else 1.0 for v in values] + [1.0] * (n_problems - len(values))
        geo.append(geomean(padded) or 0.0)
    return {"solved_fraction": solved, "geomean_speedup_all": geo}
