"""The lineage tree of a run: every attempt under the node it was written from.

Read from state alone (``attempts`` carry ``parent``; ``reviews`` carry a search round's diagnosis),
so the greedy loop and the search rounds draw the same way. Attempts recorded before lineage was
kept (no ``parent``) hang under the attempt before them.
"""

from __future__ import annotations

import html
from typing import Any

from pragma.tools import tunables

ROOT = 0


def parent_of(attempt: dict[str, Any]) -> int:
    if "parent" in attempt:
        return int(attempt.get("parent") or ROOT)
    return max(0, int(attempt["iteration"]) - 1)


def children(state: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """node -> its attempts in iteration order; ROOT holds the fresh starts."""
    known = {int(a["iteration"]) for a in state.get("attempts", [])}
    tree: dict[int, list[dict[str, Any]]] = {}
    for a in sorted(state.get("attempts", []), key=lambda a: a["iteration"]):
        parent = parent_of(a)
        tree.setdefault(parent if parent in known else ROOT, []).append(a)
    return tree


def label(a: dict[str, Any], best_iteration: int | None) -> str:
    """#4 refine of #3 · ok 2.310x · the best"""
    text = f"#{a['iteration']} {a.get('origin', '')}".rstrip()
    if a.get("origin") == "tune":
        # the tuner's child: the values it chose and the sweep that found them
        text += f" ({str(a.get('guidance', '')).removeprefix('tuner: ')}; {a.get('variants_timed', 0)} variants, "
        text += f"{float(a.get('sweep_s', 0.0)):.0f} s)"
    text += f" · {a['status']}"
    if a["status"] == "ok":
        text += f" {float(a.get('speedup', 0.0)):.3f}x"
        if best_iteration == a["iteration"]:
            text += " · the best"
        elif a.get("is_new_best"):
            text += " · accepted, since surpassed"
    return text


def _bottlenecks(state: dict[str, Any]) -> dict[int, str]:
    found = {int(r["iteration"]): r.get("bottleneck", "") for r in state.get("reviews", []) if r.get("bottleneck")}
    best = state.get("best") or {}
    if best.get("iteration") and (best.get("profile") or {}).get("bottleneck"):
        found.setdefault(int(best["iteration"]), best["profile"]["bottleneck"])
    return found


def render_text(state: dict[str, Any]) -> list[str]:
    """The tree as a nested Markdown list (readable anywhere, diff-friendly)."""
    tree, best = children(state), (state.get("best") or {}).get("iteration")
    found = _bottlenecks(state)
    lines: list[str] = []

    def walk(node: int, depth: int) -> None:
        for a in tree.get(node, []):
            extra = f" · profile: {found[a['iteration']]}" if a["iteration"] in found else ""
            lines.append(f"{'  ' * depth}- {label(a, best)}{extra}")
            walk(int(a["iteration"]), depth + 1)

    walk(ROOT, 0)
    return lines


def render_mermaid(state: dict[str, Any]) -> list[str]:
    """The tree as a Mermaid flowchart (GitHub and most Markdown viewers draw it)."""
    best = (state.get("best") or {}).get("iteration")
    lines = ["```mermaid", "graph TD", '  n0(["problem"])']
    for a in sorted(state.get("attempts", []), key=lambda a: a["iteration"]):
        i = int(a["iteration"])
        style = ":::best" if i == best else (":::ok" if a["status"] == "ok" else ":::failed")
        lines.append(f'  n{i}["{label(a, best)}"]{style}')
    for node, kids in sorted(children(state).items()):
        lines += [f"  n{node} --> n{a['iteration']}" for a in kids]
    lines += [
        "  classDef best fill:#b7e4c7,stroke:#1b4332",
        "  classDef ok fill:#e9f5ec",
        "  classDef failed fill:#fde2e1",
        "```",
    ]
    return lines


# The counters every LLM log entry carries, summed per attempt by llm_by_attempt.
LLM_COUNTERS = ("input_tokens", "output_tokens", "wall_s", "cost_usd")


def llm_by_attempt(state: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per attempt: the LLM calls about it summed (the Coder's that wrote it, the Conductor's or
    repair's that read its result), as ``LLM_COUNTERS``. The one place the log is summed: the
    lineage tree, report.md's usage table and the eval's attempt rows all read this."""
    out: dict[int, dict[str, float]] = {}
    for entry in state.get("log", []):
        acc = out.setdefault(int(entry.get("attempt", 0)), dict.fromkeys(LLM_COUNTERS, 0.0))
        for key in LLM_COUNTERS:
            acc[key] += float(entry.get(key, 0.0) or 0.0)
    return out


def costs(state: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per attempt: tokens and seconds of the LLM calls about it and the verifier's seconds."""
    out = {
        i: {"tokens": c["input_tokens"] + c["output_tokens"], "llm_s": c["wall_s"], "verify_s": 0.0}
        for i, c in llm_by_attempt(state).items()
    }
    for a in state.get("attempts", []):
        c = out.setdefault(int(a["iteration"]), {"tokens": 0.0, "llm_s": 0.0, "verify_s": 0.0})
        c["verify_s"] = float(a.get("wall_s", 0.0) or 0.0)
    return out


def sweep_tables(state: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per finished sweep of the tuner (nodes/tune.py): (heading, header, rows), one row per variant
    timed. Shared by report.md and report.html."""
    header = ["parameter", "value", "status", "speedup", "vs best point", "runtime ms", "verify s", "better"]
    out = []
    for r in state.get("sweeps", []):
        winner = tunables.describe(r.get("winner", {}), r.get("dims", []))
        child = f"; tuned child #{r['child']}" if r.get("child") else ""
        heading = (
            f"Sweep of #{r['parent']}: {len(r.get('trials', []))} variants in {float(r.get('spent_s', 0)):.1f} s "
            f"(budget {float(r.get('budget_s', 0)):.0f} s); base {float(r.get('base_speedup', 0)):.3f}x, "
            f"winner {winner} {float(r.get('winner_speedup', 0)):.3f}x{child}; "
            f"gate: {r.get('gate') or 'not run (no variant beat the candidate)'}"
        )
        rows = [
            [
                tunables.label(t["dim"]),
                str(t["value"]),
                t["status"],
                f"{float(t['speedup']):.3f}x" if t["status"] == "ok" else "",
                f"{float(t.get('vs_point', 0.0)):.3f}x" if t["status"] == "ok" else "",
                f"{float(t['runtime_ms']):.4f}" if t["status"] == "ok" else "",
                f"{float(t['wall_s']):.1f}",
                "yes" if t.get("improved") else "no",
            ]
            for t in r.get("trials", [])
        ]
        out.append((heading, header, rows))
    return out


def render_html(state: dict[str, Any], title: str) -> str:
    """A self-contained page: the tree as nested lists, each node with its guidance, diff and cost."""
    tree, best = children(state), (state.get("best") or {}).get("iteration")
    found = _bottlenecks(state)
    spent = costs(state)

    def node_html(a: dict[str, Any]) -> str:
        cls = "best" if a["iteration"] == best else ("ok" if a["status"] == "ok" else "failed")
        parts = [f'<span class="{cls}">{html.escape(label(a, best))}</span>']
        if a["iteration"] in found:
            parts.append(f'<span class="note">profile: {html.escape(found[a["iteration"]])}</span>')
        c = spent.get(int(a["iteration"]), {})
        parts.append(
            f'<span class="note">{c.get("tokens", 0):.0f} tokens, {c.get("llm_s", 0):.1f} s LLM, '
            f"{c.get('verify_s', 0):.1f} s verifier</span>"
        )
        details = []
        if a.get("guidance"):
            details.append(f"<p><b>guidance</b></p><pre>{html.escape(a['guidance'])}</pre>")
        if a.get("diff"):
            details.append(f"<p><b>diff against #{parent_of(a)}</b></p><pre>{html.escape(a['diff'])}</pre>")
        if a["status"] != "ok" and a.get("message"):
            details.append(f"<pre>{html.escape(str(a['message'])[:600])}</pre>")
        if details:
            parts.append("<details><summary>details</summary>" + "".join(details) + "</details>")
        kids = tree.get(int(a["iteration"]), [])
        sub = "<ul>" + "".join(node_html(k) for k in kids) + "</ul>" if kids else ""
        return "<li>" + " ".join(parts) + sub + "</li>"

    body = "<ul>" + "".join(node_html(a) for a in tree.get(ROOT, [])) + "</ul>"
    sweeps = "".join(
        f"<p>{html.escape(heading)}</p><table><tr>"
        + "".join(f"<th>{html.escape(h)}</th>" for h in header)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
        + "</table>"
        for heading, header, rows in sweep_tables(state)
    )
    if sweeps:
        body += f"<h2>Tuner sweeps</h2>{sweeps}"
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:2em}ul{list-style:none;border-left:1px solid #999;padding-left:1.2em}"
        "li{margin:.4em 0}.best{background:#b7e4c7;padding:2px 6px}.ok{background:#e9f5ec;padding:2px 6px}"
        ".failed{background:#fde2e1;padding:2px 6px}.note{color:#555;font-size:90%}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 8px;text-align:left}"
        "pre{background:#f6f6f6;padding:.5em;max-width:100em;overflow-x:auto;font-size:85%}"
        f"</style></head><body><h1>{html.escape(title)}</h1><h2>Lineage</h2>{body}</body></html>\n"
    )
