"""Run outputs: ``best.py`` (standalone kernel), ``report.md`` (the attempt history and lineage)
and ``report.html`` (the lineage tree with each attempt's guidance and diff)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pragma.graph import lineage
from pragma.graph.context import Context
from pragma.graph.routing import candidates_written, per_round, stop_reason
from pragma.tools.backends import render_profile  # cpu or gpu, as the profile says
from pragma.tools.export import standalone_source


def _first_line(text: str, limit: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return (line[: limit - 1] + "…") if len(line) > limit else line


def render_report(state: dict[str, Any], ctx: Context, thread_id: str) -> str:
    problem, best = state.get("problem", {}), state.get("best") or {}
    lines = [
        f"# PRAGMA run `{thread_id}`",
        "",
        f"- problem: `{problem.get('path', '')}`",
        f"- candidates written: {candidates_written(state)} (max_iterations={ctx.max_iterations})"
        + (f", plus {state.get('iteration', 0) - candidates_written(state)} tuned" if state.get("sweeps") else ""),
        f"- stopped because: {stop_reason(state, ctx) or 'the run is not finished'}",
        *[
            f"- the Conductor's stop after attempt {o['attempt']} was overruled: {o['reason']}"
            for o in state.get("stop_overrules", [])
        ],
        f"- threads: {ctx.num_threads}; timing: {ctx.warmup_calls}+ warm-up + up to {ctx.timed_calls} "
        f"timed calls each (fewer once the speedup's CI is within +-{ctx.timing_ci_pct}%, with no best "
        "to beat), reference and candidate interleaved",
        f"- search: {ctx.search}, {per_round(ctx)} candidate(s) per round",
        f"- spent: {spent_text(state)}",
        "",
    ]
    if best:
        lines += [
            f"## Best: attempt {best['iteration']}, {best['speedup']:.3f}x over PyTorch",
            f"{best['runtime_ms']:.4f} ms vs reference {best['ref_runtime_ms']:.4f} ms (medians). "
            "The best is the verifier's accepted best; best.py holds it.",
            "",
        ]
        lines += [
            f"- attempt {a['iteration']} measured {a['speedup']:.3f}x, {verdict(a, best)}"
            for a in state.get("attempts", [])
            if a["status"] == "ok" and a["iteration"] != best["iteration"] and a["speedup"] > best["speedup"]
        ]
        lines += ["", "```", render_profile(best.get("profile") or {}), "```", ""]
    else:
        lines += ["## No correct kernel was found", ""]
    lines += [
        "## Attempts",
        "",
        "| # | origin | status | speedup | runtime ms | ref ms | max abs diff | message |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in state.get("attempts", []):
        msg = _first_line(a.get("message", "")).replace("|", "\\|")
        if a["status"] == "ok":
            msg = f"{verdict(a, best)}; {msg}" if msg else verdict(a, best)
        lines.append(
            f"| {a['iteration']} | {a.get('origin', '')} | {a['status']} | {a['speedup']:.3f} | "
            f"{a['runtime_ms']:.4f} | {a['ref_runtime_ms']:.4f} | {a['max_abs_diff']:.3g} | {msg} |"
        )
    lines += ["", "## Lineage", "", "Each attempt under the attempt it was written from (refined or repaired).", ""]
    lines += [*lineage.render_text(state), "", *lineage.render_mermaid(state)]
    if tables := lineage.sweep_tables(state):
        lines += ["", "## Tuner sweeps", "", "Each variant verified and timed in full; no LLM call.", ""]
    for heading, header, rows in tables:
        lines += [heading, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    lines += ["", *render_usage(state)]
    lines += ["", "## Conductor and repair guidance", ""]
    for entry in state.get("log", []):
        if entry["role"] != "coder":
            lines += [
                f"### after attempt {entry['attempt']} ({entry.get('node', entry['role'])})",
                "",
                entry["reply"].strip(),
                "",
            ]
    return "\n".join(lines) + "\n"


def spent(state: dict[str, Any]) -> dict[str, float]:
    """What the run spent: LLM calls and tokens, seconds in the verifier, wall seconds from the
    start to the last verified attempt (a resumed run's pause included)."""
    usage, attempts = state.get("usage", {}), state.get("attempts", [])
    finished = [float(a["finished_at"]) for a in attempts if a.get("finished_at")]
    started = float(state.get("started_at") or 0.0)
    return {
        "llm_calls": float(usage.get("llm_calls", 0)),
        "input_tokens": float(usage.get("input_tokens", 0)),
        "output_tokens": float(usage.get("output_tokens", 0)),
        "verify_s": sum(float(a.get("wall_s", 0.0)) for a in attempts),
        "tune_s": sum(float(r.get("spent_s", 0.0)) for r in state.get("sweeps", [])),
        "tune_variants": float(sum(len(r.get("trials", [])) for r in state.get("sweeps", []))),
        "wall_s": max(finished) - started if finished and started else 0.0,
    }


def spent_text(state: dict[str, Any]) -> str:
    s = spent(state)
    return (
        f"{s['llm_calls']:.0f} LLM calls, {s['input_tokens']:.0f} tokens in, {s['output_tokens']:.0f} tokens out; "
        f"{s['verify_s']:.1f} s in the verifier; {s['tune_s']:.1f} s in the tuner ({s['tune_variants']:.0f} "
        f"variants, no LLM call); {s['wall_s']:.0f} s wall"
    )


def verdict(attempt: dict[str, Any], best: dict[str, Any]) -> str:
    """What became of a correct attempt: the accepted best, once accepted, or not accepted (why)."""
    if best and attempt["iteration"] == best.get("iteration"):
        return "the best (accepted by the verifier)"
    if attempt.get("is_new_best"):
        return "accepted as best then, since surpassed"
    if attempt.get("is_new_best") is None:
        return "no acceptance decision recorded"
    if attempt.get("is_suspicious"):
        return "not accepted: the speedup is physically implausible"
    return "not significantly faster than the best" if best else "not accepted by the verifier"


def render_usage(state: dict[str, Any]) -> list[str]:
    """LLM cost per call, per iteration and per run (costs only where a price table is set)."""
    usage, calls = state.get("usage", {}), state.get("log", [])
    priced = "cost_usd" in usage
    lines = [
        "## LLM usage",
        "",
        "| attempt | node | tokens in | tokens out | wall s |" + (" cost USD |" if priced else ""),
        "|---|---|---|---|---|" + ("---|" if priced else ""),
    ]
    for c in calls:
        lines.append(
            f"| {c['attempt']} | {c.get('node', c['role'])} | {c['input_tokens']:.0f} | "
            f"{c['output_tokens']:.0f} | {c.get('wall_s', 0.0):.1f} |"
            + (f" {c.get('cost_usd', 0.0):.5f} |" if priced else "")
        )
    lines += [
        "",
        "Per iteration: "
        + "; ".join(
            f"#{a}: {v['input_tokens'] + v['output_tokens']:.0f} tokens, {v['wall_s']:.1f} s"
            + (f", ${v['cost_usd']:.5f}" if priced else "")
            for a, v in sorted(lineage.llm_by_attempt(state).items())
        ),
        f"Run total: {usage.get('input_tokens', 0):.0f} tokens in, {usage.get('output_tokens', 0):.0f} out, "
        f"{usage.get('llm_wall_s', 0.0):.1f} s in LLM calls"
        + (f", ${usage['cost_usd']:.5f}" if priced else " (no price table configured)"),
    ]
    return lines


def write_outputs(state: dict[str, Any], ctx: Context, thread_id: str, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    best = state.get("best") or {}
    if best.get("code"):
        path = out_dir / "best.py"
        path.write_text(standalone_source(best["code"]))
        written.append(path)
    report = out_dir / "report.md"
    report.write_text(render_report(state, ctx, thread_id))
    written.append(report)
    page = out_dir / "report.html"
    page.write_text(lineage.render_html(state, f"PRAGMA run {thread_id}: lineage"))
    written.append(page)
    return written
