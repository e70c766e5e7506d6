"""Profile diff: the candidate's metrics next to the historical best's, as a compact delta table."""

from __future__ import annotations

from typing import Any


def diff_profiles(best: dict[str, Any] | None, current: dict[str, Any]) -> list[dict[str, Any]]:
    best_metrics = (best or {}).get("metrics", {})
    rows = []
    for name, cur in current.get("metrics", {}).items():
        if "value" not in cur:
            continue
        old = best_metrics.get(name, {}).get("value")
        delta_pct = (100.0 * (cur["value"] - old) / old) if old not in (None, 0) else None
        rows.append({"metric": name, "unit": cur.get("unit", ""), "best": old, "current": cur["value"],
                     "delta_pct": delta_pct, "source": cur.get("source", "")})
    return rows


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}"


def render_diff(rows: list[dict[str, Any]], best: dict[str, Any] | None, current: dict[str, Any]) -> str:
    lines = ["| metric | unit | historical best | current | change |", "|---|---|---|---|---|"]
    for r in rows:
        change = "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f}%"
        lines.append(f"| {r['metric']} | {r['unit']} | {_fmt(r['best'])} | {_fmt(r['current'])} | {change} |")
    lines.append(f"| bottleneck | | {(best or {}).get('bottleneck', '-')} | {current.get('bottleneck', '-')} | |")
    return "\n".join(lines)
