"""The acceptance rule: when does a verified candidate become the new historical best?

Stated once, here; every place that decides uses these functions (the judge's extra batches and
confirmation, ``verify``'s decision, the profiler's and the search's ``best`` update, and the
``best`` reducer in ``graph/state.py``).

The rule as it is:

1. The candidate's status is ``ok`` (correct on every trial and stress variant), its held-out
   re-check ran, and its speedup is physically plausible (``is_suspicious`` false).
2. With no best yet, that is enough: the first correct candidate is the best.
3. With a best timed beside it in the same session (``samples_ms["best"]``), the lower end of the
   95% bootstrap CI of its speedup over the best must exceed the bar ``1 + acceptance_margin``.
   When the judge timed a second pair of runners (``confirmation``), that pair's CI must clear the
   bar too: one process pair can carry a bias of its own.
4. When the best could not be re-run beside it, the lower end of its CI over the reference must
   exceed the best's recorded speedup.
5. A ``best`` update carries the verifier's decision (``is_new_best``) and the reducer obeys it; an
   update for the best's own iteration merges into it (the profile attaches later); an update
   without a decision (results older than the decision) replaces the best only when strictly faster.

No dependencies beyond the standard library: the judge's process imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The judge times a would-be acceptance in a second pair of runners unless the first pair's CI low
# clears the bar by more than any per-process bias measured (1.17x): below bar x this factor.
CONFIRM_BELOW = 1.25


def bar(acceptance_margin: float) -> float:
    """The speedup over the best whose CI low a candidate must exceed: 1 + ``acceptance_margin``."""
    return 1.0 + acceptance_margin


def clears(ci_low: float, bar_x: float) -> bool:
    """Whether a CI whose lower end is ``ci_low`` is above the bar (strictly: equal is not faster)."""
    return ci_low > bar_x


def decided(ci: tuple[float, float] | list[float], bar_x: float) -> bool:
    """Whether more timing can no longer change the decision: the CI lies wholly on one side of the
    bar. The judge times extra batches while it straddles the bar."""
    low, high = ci
    return not (low <= bar_x <= high)


def needs_confirmation(ci_low: float, bar_x: float) -> bool:
    """Whether a CI that clears the bar does so by too little to rule out a per-process bias, so the
    judge times a second pair of runners (``CONFIRM_BELOW``)."""
    return bar_x < ci_low < bar_x * CONFIRM_BELOW


def decide(res: Mapping[str, Any], has_best: bool, best_speedup: float, margin: float = 0.0) -> tuple[bool, str]:
    """(is_new_best, the reason in one line) for a verification result, by rules 1-4 above."""
    if res["status"] != "ok":
        return False, f"not accepted: status {res['status']}"
    if not res["holdout_ok"]:
        return False, "not accepted: the held-out re-check did not run"
    if res["is_suspicious"]:
        return False, "not accepted: the speedup is physically implausible (see speedup_plausible)"
    if not has_best:
        return True, "accepted: first correct candidate (no best yet)"
    if res["samples_ms"].get("best"):
        low, high = res["speedup_vs_best_ci"]
        how = f" after {res['extra_batches']} extra batch(es) of timing" if res.get("extra_batches") else ""
        bar_x = bar(margin)
        confirmation = res.get("confirmation") or {}
        if clears(low, bar_x) and confirmation and not confirmation.get("confirmed"):
            c_low, c_high = confirmation["speedup_vs_best_ci"]
            return False, (
                f"not accepted: faster than the best in the first pair of runners, CI [{low:.3f}, {high:.3f}], "
                f"but not in a second pair, CI [{c_low:.3f}, {c_high:.3f}] (bar {bar_x:.3f}): a per-process bias"
            )
        if clears(low, bar_x):
            if confirmation:
                c_low, c_high = confirmation["speedup_vs_best_ci"]
                how += f", confirmed by a second pair of runners (CI [{c_low:.3f}, {c_high:.3f}])"
            return True, (
                f"accepted{how}: faster than the best, 95% CI of the speedup over it "
                f"[{low:.3f}, {high:.3f}] > {bar_x:.3f} (1 + acceptance_margin)"
            )
        return False, (
            f"not accepted{how}: 95% CI of the speedup over the best [{low:.3f}, {high:.3f}] is not "
            f"above {bar_x:.3f} (1 + acceptance_margin)"
        )
    # The best could not be re-run next to it: compare against its recorded speedup instead.
    low = res["speedup_ci"][0]
    if clears(low, best_speedup):
        return (
            True,
            f"accepted: speedup CI low {low:.3f} above the best's recorded {best_speedup:.3f} (best not re-run)",
        )
    return False, f"not accepted: speedup CI low {low:.3f} not above the best's recorded {best_speedup:.3f}"


def best_update(
    candidate: Mapping[str, Any], result: Mapping[str, Any], profile: dict[str, Any]
) -> dict[str, Any] | None:
    """The ``best`` state update for a verified candidate, or None when the verifier refused it
    (``is_new_best`` false). The update carries the decision when there is one, so the reducer
    (``replaces``) obeys it; a result without one leaves the reducer to rule 5's speed comparison."""
    decision = result.get("is_new_best")
    if decision is False:
        return None
    update: dict[str, Any] = {
        "iteration": candidate["iteration"],
        "code": candidate["code"],
        "speedup": result["speedup"],
        "speedup_ci": result.get("speedup_ci", [0.0, 0.0]),
        "runtime_ms": result["runtime_ms"],
        "ref_runtime_ms": result["ref_runtime_ms"],
        "profile": profile,
    }
    if decision is True:
        update["is_new_best"] = True
    return update


def replaces(current: Mapping[str, Any], update: Mapping[str, Any]) -> bool:
    """Rule 5 for an update of another iteration than the best's: the verifier's decision when the
    update carries one, else only a strictly faster speedup over the reference (or no best yet)."""
    if "is_new_best" in update:
        return bool(update["is_new_best"])
    return not current or float(update.get("speedup", 0.0)) > float(current.get("speedup", 0.0))
