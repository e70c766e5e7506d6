"""Profile diff: what moved between the historical best and the current candidate, and by how much.

Only metrics that changed beyond noise are listed (relative change for counts and times,
percentage points for ``%`` metrics), most-moved first, in a bounded table; the rest is summarised
in one line. Each row says whether the move is an improvement (metrics catalog ``better``).
"""

from __future__ import annotations

from typing import Any

from pragma.tools.profilers.metrics import better_direction

MIN_CHANGE_PCT = 5.0  # relative change below this is run-to-run noise for times and counts
MIN_CHANGE_PP = 2.0  # percentage points for metrics already in %
MAX_ROWS = 12
FIRST = ("per_call_ms", "roofline_pct")  # always on top when they moved
# Times measured by the profiling run itself: one process, not interleaved with the best, so a move
# here is not the speed verdict (the verifier's head-to-head timing is; issue 34).
PROFILE_TIMES = ("per_call_ms", "task-clock", "cold_call_ms")


def _is_pct(unit: str) -> bool:
    return unit.strip() == "%"


def diff_profiles(best: dict[str, Any] | None, current: dict[str, Any]) -> dict[str, Any]:
    """``{"rows": [moved metrics], "unchanged": [...], "new": [...], "gone": [...], ...}``."""
    best = best or {}
    old_m, new_m = best.get("metrics", {}), current.get("metrics", {})
    rows, unchanged = [], []
    for name, cur in new_m.items():
        old = old_m.get(name)
        if "value" not in cur or not old or "value" not in old:
            continue
        a, b, unit = float(old["value"]), float(cur["value"]), cur.get("unit", "")
        if _is_pct(unit):
            delta, moved, size = b - a, abs(b - a) >= MIN_CHANGE_PP, abs(b - a)
        else:
            # From zero there is no relative change: None (state stays JSON-native, never inf).
            delta = 100.0 * (b - a) / abs(a) if a else (0.0 if b == a else None)
            moved, size = (True, 1e12) if delta is None else (abs(delta) >= MIN_CHANGE_PCT, abs(delta))
        if not moved:
            unchanged.append(name)
            continue
        direction = better_direction(name)
        verdict = "" if not direction else "better" if (b < a) == (direction == "lower") else "worse"
        rows.append(
            {
                "metric": name,
                "unit": unit,
                "best": a,
                "current": b,
                "change": delta,
                "change_unit": "pp" if _is_pct(unit) else "%",
                "verdict": verdict,
                "same_source": old.get("source") == cur.get("source"),
                "_size": size,
            }
        )
    rows.sort(
        key=lambda r: (r["metric"] not in FIRST, FIRST.index(r["metric"]) if r["metric"] in FIRST else 0, -r["_size"])
    )
    for r in rows:
        r.pop("_size")
    return {
        "has_best": bool(best.get("metrics")),
        "rows": rows[:MAX_ROWS],
        "more_moved": max(0, len(rows) - MAX_ROWS),
        "unchanged": unchanged,
        "new": [n for n in new_m if n not in old_m],
        "gone": [n for n in old_m if n not in new_m],
        "bottleneck": [best.get("bottleneck", "-"), current.get("bottleneck", "-")],
        "confidence": [best.get("confidence", "-"), current.get("confidence", "-")],
    }


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def render_diff(diff: dict[str, Any], best_iteration: int | None = None) -> str:
    if not diff["has_best"]:
        return "no historical best with a profile yet: nothing to compare against"
    who = f"historical best (iteration {best_iteration})" if best_iteration else "historical best"
    lines = [
        f"{who} -> current: {len(diff['rows']) + diff['more_moved']} metric(s) moved, "
        f"{len(diff['unchanged'])} unchanged (within ±{MIN_CHANGE_PCT:.0f}% or ±{MIN_CHANGE_PP:.0f} pp)"
    ]
    if diff["rows"]:
        lines += ["| metric | unit | best | current | change | |", "|---|---|---|---|---|---|"]
        for r in diff["rows"]:
            change = "from 0" if r["change"] is None else f"{r['change']:+.1f}{r['change_unit']}"
            flag = r["verdict"] + ("" if r["same_source"] else " (different source)")
            if r["metric"] in PROFILE_TIMES:
                flag += " (profiling run)"
            lines.append(
                f"| {r['metric']} | {r['unit']} | {_fmt(r['best'])} | {_fmt(r['current'])} | {change} | "
                f"{flag.strip()} |"
            )
        if diff["more_moved"]:
            lines.append(f"(and {diff['more_moved']} smaller moves not shown)")
        if any(r["metric"] in PROFILE_TIMES for r in diff["rows"]):
            lines.append(
                "(profiling run) times come from the two profiling runs, not from the verifier's interleaved "
                "timing of the candidate against the best: whether it is faster is the verifier's verdict"
            )
    b0, b1 = diff["bottleneck"]
    lines.append(f"bottleneck: {b0} -> {b1}" if b0 != b1 else f"bottleneck: {b1} (unchanged)")
    c0, c1 = diff["confidence"]
    if c0 != c1:
        lines.append(f"confidence: {c0} -> {c1} (the two profiles rest on different evidence)")
    if diff["new"]:
        lines.append("only in current: " + ", ".join(diff["new"][:10]))
    if diff["gone"]:
        lines.append("only in best: " + ", ".join(diff["gone"][:10]))
    return "\n".join(lines)
