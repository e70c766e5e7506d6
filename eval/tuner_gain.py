"""What the tuner bought: a run with the tuner against the same suite run without it (issue 32).

    python -m pragma.eval.tuner_gain TUNED_RUN [--untuned UNTUNED_RUN] [--mode pragma] [--json FILE]

Two ratios per problem, because they answer different questions:

- **head to head** (the tuned run alone): where the tuner's winner was accepted, the gate's
  ``speedup_vs_best``, the winner and the kernel it was tuned from timed in the same interleaved
  rounds; 1.0 where the sweep kept the kernel (no variant passed the gate: the best is unchanged).
  Free of the drift between sessions; with the scripted model the untuned run's best is exactly the
  kernel the sweep started from, so this is tuned over untuned.
- **across runs** (with ``--untuned``): each run's best speedup over PyTorch, taken in different
  sessions. On a loaded 2-core machine two sessions of the same kernel differ by a few percent, so
  a ratio here below 1.0 for an unchanged kernel is the drift, which the table shows beside it.

Also per problem: the tuner's seconds and variants and each run's LLM calls (the tuner calls none:
an equal count is the equal-budget check).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pragma.eval import metrics
from pragma.graph.clikit import console
from pragma.graph.clikit import out as results


class TunerGainError(RuntimeError):
    """A user mistake (an unknown run, a mode the run has not), said in one line."""


def _rows(run_id: str, mode: str, results_url: str | None) -> dict[str, dict[str, Any]]:
    from pragma.eval import harness

    try:
        db, _ = harness.load_run(run_id, results_url)
    except harness.HarnessError as exc:
        raise TunerGainError(str(exc)) from None
    rows = {r["problem"]: r for r in db.problems(run_id) if r["mode"] == mode}
    if not rows:
        raise TunerGainError(f"run {run_id} has no problem in mode {mode!r}")
    return rows


def _tuned_children(run_id: str, mode: str, problems: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each problem's tuner children (attempts of origin ``tune``), read from the run's checkpoints."""
    from pragma.eval import store
    from pragma.graph.builder import compile_app

    out: dict[str, list[dict[str, Any]]] = {}
    with store.checkpointer(store.default_checkpoint_url(run_id)) as saver:
        app = compile_app(saver)
        for problem in problems:
            config = {"configurable": {"thread_id": store.thread_id(run_id, mode, problem)}}
            values = app.get_state(config).values or {}
            out[problem] = [a for a in values.get("attempts", []) if a.get("origin") == "tune"]
    return out


def accepted(children: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tuner children the gate crowned (each became the best)."""
    return [c for c in children if c.get("status") == "ok" and c.get("is_new_best")]


def head_to_head(children: list[dict[str, Any]]) -> float:
    """Tuned over untuned for one problem: the product of the accepted children's ratios over the
    kernel each was tuned from (each measured in its gate's session), 1.0 when none was accepted."""
    ratio = 1.0
    for c in accepted(children):
        if c.get("speedup_vs_best"):
            ratio *= float(c["speedup_vs_best"])
    return ratio


def compare(
    tuned_run: str, untuned_run: str | None = None, mode: str = "pragma", results_url: str | None = None
) -> dict[str, Any]:
    tuned = _rows(tuned_run, mode, results_url)
    untuned = _rows(untuned_run, mode, results_url) if untuned_run else {}
    children = _tuned_children(tuned_run, mode, sorted(tuned))
    problems = []
    for name in sorted(tuned):
        t, u = tuned[name], untuned.get(name)
        row = {
            "problem": name,
            "tuned_best": float(t.get("best_speedup") or 0.0),
            "head_to_head": head_to_head(children[name]) if t.get("solved") else None,
            "params": "; ".join(str(c.get("guidance", "")).removeprefix("tuner: ") for c in accepted(children[name])),
            "tune_s": float(t.get("tune_s") or 0.0),
            "tune_variants": int(t.get("tune_variants") or 0),
            "llm_calls_tuned": float(t.get("llm_calls") or 0.0),
            "wall_s_tuned": float(t.get("wall_s") or 0.0),
        }
        if u is not None:
            ub = float(u.get("best_speedup") or 0.0)
            row |= {
                "untuned_best": ub,
                "across_runs": row["tuned_best"] / ub if ub > 0 and row["tuned_best"] > 0 else None,
                "llm_calls_untuned": float(u.get("llm_calls") or 0.0),
                "wall_s_untuned": float(u.get("wall_s") or 0.0),
            }
        problems.append(row)
    h2h = [p["head_to_head"] for p in problems if p["head_to_head"]]
    across = [p["across_runs"] for p in problems if p.get("across_runs")]
    return {
        "tuned_run": tuned_run,
        "untuned_run": untuned_run,
        "mode": mode,
        "problems": problems,
        "geomean_head_to_head": metrics.geomean(h2h) if h2h else None,
        "geomean_across_runs": metrics.geomean(across) if across else None,
        "tuned_problems": sum(1 for p in problems if p["params"]),
        "tune_s_mean": sum(p["tune_s"] for p in problems) / len(problems),
        "tune_s_max": max(p["tune_s"] for p in problems),
        "llm_calls_tuned": sum(p["llm_calls_tuned"] for p in problems),
        "llm_calls_untuned": sum(p.get("llm_calls_untuned", 0.0) for p in problems) if untuned_run else None,
    }


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}x"


def render_markdown(result: dict[str, Any]) -> str:
    r = result
    lines = [
        f"## Tuner gain: run {r['tuned_run']}"
        + (f" against {r['untuned_run']} (no tuner)" if r["untuned_run"] else ""),
        "",
        f"- tuned over untuned, head to head (the gate's session): geomean **{_x(r['geomean_head_to_head'])}** "
        f"over {len(r['problems'])} problems, {r['tuned_problems']} tuned",
    ]
    if r["untuned_run"]:
        lines.append(f"- best over best, across the two runs' sessions: geomean {_x(r['geomean_across_runs'])}")
        lines.append(f"- LLM calls: {r['llm_calls_tuned']:.0f} with the tuner, {r['llm_calls_untuned']:.0f} without")
    lines.append(f"- tuner seconds per problem: {r['tune_s_mean']:.1f} mean, {r['tune_s_max']:.1f} max")
    head = "| Problem | Tuned best | Head to head | Winner | Tuner s (variants) |"
    rule = "|---|---|---|---|---|"
    if r["untuned_run"]:
        head, rule = head + " Untuned best | Across runs |", rule + "---|---|"
    lines += ["", head, rule]
    for p in r["problems"]:
        line = (
            f"| {p['problem']} | {_x(p['tuned_best'])} | {_x(p['head_to_head'])} | {p['params'] or '-'} | "
            f"{p['tune_s']:.1f} ({p['tune_variants']}) |"
        )
        if r["untuned_run"]:
            line += f" {_x(p.get('untuned_best'))} | {_x(p.get('across_runs'))} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pragma.eval.tuner_gain", description=__doc__.split("\n")[0])
    ap.add_argument("tuned_run")
    ap.add_argument("--untuned", help="The same suite run with --set tune_budget_s=0.")
    ap.add_argument("--mode", default="pragma")
    ap.add_argument("--results-db", help="Results database (default: the data directory's).")
    ap.add_argument("--json", type=Path, help="Also write the figures to this JSON file.")
    args = ap.parse_args(argv)
    try:
        result = compare(args.tuned_run, args.untuned, args.mode, args.results_db)
    except TunerGainError as exc:
        console.print(f"error: {exc}")
        return 2
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    results.print(render_markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
