"""``pragma eval report RUN``: report.md (+ PNG files) and a self-contained report.html.

Tables are built once as data (header, rows) and rendered to both Markdown and HTML; the HTML
embeds the figures as base64 PNGs so the page can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from pragma.eval import figures, metrics
from pragma.eval.db import loads
from pragma.eval.harness import load_run
from pragma.eval.job import TORCH_COMPILE
from pragma.eval.metrics import Outcome
from pragma.eval.suites import CATEGORIES

Table = tuple[list[str], list[list[str]]]

CONVENTIONS = [
    "**Solved**: the job finished and produced an accepted best kernel (verified correct on fresh and "
    "held-out inputs and accepted by the verifier). **Success** = solved / problems. Every problem x mode "
    "of the run is in every table: anything but a finished, solved job (error, killed at its time budget, "
    "interrupted, pending, running) counts as unsolved, at 1.0x in the all-problems figures. A job killed "
    "at its budget shows the verifier's last accepted best in the per-problem table, but counts as unsolved.",
    "**Speedup** = eager PyTorch time / kernel time (medians, interleaved in one process, "
    "`num_threads` threads). *Speedup (solved)*: arithmetic mean over solved problems, as the paper "
    "reports it. *Geomean (all)*: geometric mean over all problems with unsolved ones counted as 1.0x "
    "(the user keeps PyTorch when the agent fails).",
    "**fast_p** = fraction of all problems solved with speedup > p (KernelBench); fast_0 = success.",
    "**Cost per solved problem** = all tokens (or USD, with a price table) the mode spent on the suite "
    "/ problems solved.",
    "**torch.compile** (baseline): `torch.compile(Model)` with the default inductor backend, timed against "
    "eager in the sandbox and cached per machine; *solved* means it compiled and matched eager at the "
    "run's tolerance.",
]


def _fmt(value: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


# The profile ablation (eval/ablation.py runs it over several runs): its modes, the mode the
# profile's contribution is measured against, and its table, which a single run's report shows too.
# Here rather than in ablation.py, so the report does not import the ablation (which imports it).
ABLATION_MODES = ("pragma", "no-profile", "single-agent")
ABLATION_REFERENCE = "no-profile"


def table_ablation(
    summaries: dict[str, dict[str, Any]], reference: str = ABLATION_REFERENCE
) -> tuple[list[str], list[list[str]]]:
    """The paper's Table I layout, one row per mode: success rate, geomean speedup over all problems
    (unsolved = 1.0x), mean over solved, LLM calls, tokens and wall time per problem, and the
    geomean against the reference mode's."""
    ref = (summaries.get(reference) or {}).get("speedup_all", {}).get("geomean")
    header = [
        "Mode",
        "Success",
        "Geomean speedup (all)",
        "Speedup (solved, mean)",
        "LLM calls / problem",
        "Tokens / problem",
        "Wall s / problem",
        f"Geomean vs {reference}",
    ]
    rows = []
    for mode, s in summaries.items():
        n = s.get("problems") or 0
        geo = s["speedup_all"]["geomean"]
        rows.append(
            [
                mode,
                _pct(s["success_rate"]),
                _fmt(geo, ".2f", "x"),
                _fmt(s["speedup_solved"]["mean"], ".2f", "x"),
                _fmt(s.get("llm_calls_per_problem"), ".1f"),
                _fmt(s["tokens"] / n if n else None, ".0f"),
                _fmt(s.get("wall_s_per_problem"), ".0f"),
                _fmt(geo / ref if geo and ref else None, ".2f", "x"),
            ]
        )
    return header, rows


def per_problem(runs: list[list[metrics.Outcome]]) -> dict[str, dict[str, list[float | None]]]:
    """``[mode][problem]``: one speedup per run (None where unsolved)."""
    out: dict[str, dict[str, list[float | None]]] = {}
    for outcomes in runs:
        for o in outcomes:
            out.setdefault(o.mode, {}).setdefault(o.problem, []).append(o.speedup if o.solved else None)
    return out


def outcomes_of(problems: list[dict[str, Any]], modes: list[str] | None = None) -> list[Outcome]:
    """Every problem x mode (``modes``, default: those in the rows), whatever its status."""
    names = sorted({(r["problem"], r["category"]) for r in problems})
    modes = modes or list(dict.fromkeys(r["mode"] for r in problems))
    return metrics.outcomes(problems, names, modes)


PENDING = ("pending", "running")


def partial_note(problems: list[dict[str, Any]]) -> str:
    """The report's first-line mark when jobs are still pending or running ("" when none are)."""
    waiting = [r for r in problems if r["status"] in PENDING]
    if not waiting:
        return ""
    return f"PARTIAL: {len(waiting)} of {len(problems)} jobs pending or running; they count as unsolved at 1.0x below"


def table_one(summaries: dict[str, dict[str, Any]]) -> Table:
    header = ["Mode", "Success", "Speedup (solved, mean)", "Geomean (all)", "Fast_1"]
    rows = [
        [
            mode,
            _pct(s["success_rate"]),
            _fmt(s["speedup_solved"]["mean"], ".2f", "x"),
            _fmt(s["speedup_all"]["geomean"], ".2f", "x"),
            _pct(s["fast"][1.0]),
        ]
        for mode, s in summaries.items()
    ]
    return header, rows


def table_full(summaries: dict[str, dict[str, Any]], priced: bool) -> Table:
    """All metrics; USD columns read "n/a" when the run had no price table (tokens are still counted)."""
    header = [
        "Mode",
        "Problems",
        "Solved",
        "fast_0",
        "fast_1",
        "fast_1.2",
        "fast_2",
        "Mean (solved)",
        "Geomean (solved)",
        "Median (solved)",
        "Mean (all)",
        "Geomean (all)",
        "Median (all)",
        "Tokens / solved",
        "USD / solved",
        "LLM calls / problem",
        "Candidates / problem",
        "Wall s / problem",
        "Tuner s / problem",
    ]
    rows = []
    for mode, s in summaries.items():
        ss, sa = s["speedup_solved"], s["speedup_all"]
        rows.append(
            [
                mode,
                str(s["problems"]),
                str(s["solved"]),
                *(_pct(s["fast"][p]) for p in metrics.FAST_THRESHOLDS),
                _fmt(ss["mean"], ".2f", "x"),
                _fmt(ss["geomean"], ".2f", "x"),
                _fmt(ss["median"], ".2f", "x"),
                _fmt(sa["mean"], ".2f", "x"),
                _fmt(sa["geomean"], ".2f", "x"),
                _fmt(sa["median"], ".2f", "x"),
                _fmt(s["tokens_per_solved"], ".0f"),
                _fmt(s["cost_per_solved_usd"] if priced else None, ".4f"),
                _fmt(s.get("llm_calls_per_problem"), ".1f"),
                _fmt(s.get("candidates_per_problem"), ".1f"),
                _fmt(s.get("wall_s_per_problem"), ".0f"),
                _fmt(s.get("tune_s_per_problem"), ".1f"),
            ]
        )
    return header, rows


def table_categories(per: dict[str, dict[str, dict[str, Any]]]) -> Table:
    header = ["Category", "Mode", "Problems", "Success", "Speedup (solved, mean)", "Geomean (all)", "Fast_1"]
    rows = []
    for cat in CATEGORIES:
        for mode, cats in per.items():
            if cat in cats:
                s = cats[cat]
                rows.append(
                    [
                        cat,
                        mode,
                        str(s["problems"]),
                        _pct(s["success_rate"]),
                        _fmt(s["speedup_solved"]["mean"], ".2f", "x"),
                        _fmt(s["speedup_all"]["geomean"], ".2f", "x"),
                        _pct(s["fast"][1.0]),
                    ]
                )
    return header, rows


def table_problems(problems: list[dict[str, Any]], modes: list[str], attempts: list[dict[str, Any]]) -> Table:
    header = ["Problem", "Category", "Ref ms", *modes]
    by_problem: dict[str, dict[str, dict[str, Any]]] = {}
    for r in problems:
        by_problem.setdefault(r["problem"], {})[r["mode"]] = r
    rows = []
    for name, cells in sorted(by_problem.items()):
        first = next(iter(cells.values()))
        ref = next((c["ref_ms"] for c in cells.values() if c.get("ref_ms")), None)
        row = [name, first["category"], _fmt(ref, ".2f")]
        for mode in modes:
            c = cells.get(mode)
            if c is None:
                row.append("missing: counted unsolved")
            elif c["solved"] and c["status"] != "finished":
                row.append(
                    f"{c['status']}: kept accepted best {c['best_speedup']:.2f}x @{c['best_iteration']}, "
                    "counted unsolved"
                )
            elif c["solved"]:
                ci = (
                    f" [{c['best_ci_low']:.2f}-{c['best_ci_high']:.2f}]"
                    if c.get("best_ci_low") is not None and c.get("best_ci_high") is not None
                    else ""
                )
                it = f" @{c['best_iteration']}" if mode != TORCH_COMPILE else ""
                row.append(f"{c['best_speedup']:.2f}x{ci}{it}")
            else:
                tried = [
                    a["status"] + ("" if a["status"] != "ok" or a.get("accepted") is None else " (not accepted)")
                    for a in attempts
                    if a["problem"] == name and a["mode"] == mode
                ]
                why = c["message"] if c["status"] != "finished" or not tried else ", ".join(tried)
                row.append(f"{c['status'] if c['status'] != 'finished' else 'unsolved'}: {why or 'no attempt'}"[:120])
        rows.append(row)
    return header, rows


def md_table(table: Table) -> str:
    header, rows = table
    esc = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in esc)]
    )


def html_table(table: Table) -> str:
    header, rows = table
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def build(run_id: str, results_url: str | None = None) -> dict[str, Any]:
    """Everything the report shows, as data."""
    db, run = load_run(run_id, results_url)
    problems, attempts = db.problems(run_id), db.attempts(run_id)
    modes = loads(run["modes_json"], [])
    context = loads(run["context_json"], {})
    max_iterations = int(context.get("max_iterations", 15))
    all_modes = modes + ([TORCH_COMPILE] if any(r["mode"] == TORCH_COMPILE for r in problems) else [])
    outcomes = outcomes_of(problems, all_modes)
    grouped = metrics.by_key(outcomes, "mode")
    summaries = {m: metrics.summarize(grouped.get(m, [])) for m in all_modes}
    per_category = metrics.by_mode_and_category(outcomes)
    per_category = {m: per_category[m] for m in all_modes if m in per_category}
    n_problems = len({r["problem"] for r in problems})
    curves = {}
    # Curves follow accepted bests of finished jobs only, so they end at Table I's figures.
    finished = {(r["problem"], r["mode"]) for r in problems if r["status"] == "finished"}
    for mode in modes:
        rows = [a for a in attempts if a["mode"] == mode and (a["problem"], mode) in finished]
        curves[mode] = metrics.curve_summary(metrics.best_so_far(rows, max_iterations), n_problems)
    sequential = {m: metrics.sequential_summary([a for a in attempts if a["mode"] == m]) for m in modes}
    status_counts: dict[str, int] = {}
    for r in problems:
        status_counts[r["status"]] = status_counts.get(r["status"], 0) + 1
    return {
        "run": run,
        "modes": modes,
        "attempts": attempts,
        "all_modes": all_modes,
        "context": context,
        "problems": problems,
        "outcomes": outcomes,
        "summaries": summaries,
        "per_category": per_category,
        "curves": curves,
        "sequential": sequential,
        "status_counts": status_counts,
        "n_problems": n_problems,
        "machine": loads(run["machine_json"], {}),
        "settings": loads(run["settings_json"], {}),
    }


def render_figures(data: dict[str, Any]) -> dict[str, bytes]:
    cats = [c for c in CATEGORIES if any(o.category == c for o in data["outcomes"])]
    speedups: dict[str, dict[str, list[float]]] = {m: {} for m in data["all_modes"]}
    unsolved: dict[str, dict[str, int]] = {m: {} for m in data["all_modes"]}
    for o in data["outcomes"]:
        if o.solved:
            speedups[o.mode].setdefault(o.category, []).append(o.speedup)
        else:
            unsolved[o.mode][o.category] = unsolved[o.mode].get(o.category, 0) + 1
    baseline = data["summaries"].get(TORCH_COMPILE, {}).get("speedup_all", {}).get("geomean")
    speedups_by_mode = per_problem([data["outcomes"]])
    return {
        "fig3_categories.png": figures.category_distribution(speedups, cats, unsolved),
        "fig4_iterations.png": figures.iteration_curves(data["curves"], baseline),
        "fig5_problems.png": figures.problem_speedups(
            {m: speedups_by_mode.get(m, {}) for m in data["all_modes"]}, sorted({o.problem for o in data["outcomes"]})
        ),
    }


def _sections(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """(heading, content) pairs; content is a Table, a figure file name or a list of text lines."""
    run, ctx, machine, settings = data["run"], data["context"], data["machine"], data["settings"]
    tc_rows = [r for r in data["problems"] if r["mode"] == TORCH_COMPILE]
    if tc_rows:
        tc_note = f"torch.compile: measured on {sum(1 for r in tc_rows if r['solved'])} of {len(tc_rows)} problems"
        reasons = sorted({r["message"] for r in tc_rows if not r["solved"] and r["message"]})
        tc_note += ("; " + "; ".join(reasons[:5])) if reasons else ""
    else:
        tc_note = "torch.compile: not measured in this run (add --torch-compile; results are cached per machine)"
    overview = [
        f"- suite: `{run['suite_dir']}`"
        + (f" with overrides `{run['overrides_path']}`" if run["overrides_path"] else ""),
        f"- problems: {data['n_problems']}; modes: {', '.join(data['modes'])}; attempt budget: "
        f"{ctx.get('max_iterations')} per problem and mode; job statuses: "
        + ", ".join(f"{n} {s}" for s, n in sorted(data["status_counts"].items())),
        f"- models: coder `{ctx.get('coder_model') or '(default)'}`, conductor "
        f"`{ctx.get('conductor_model') or ctx.get('coder_model') or '(default)'}`",
        f"- machine: {machine.get('cpu')} ({machine.get('cores')} cores, {machine.get('simd')}), torch "
        f"{machine.get('torch')}; kernels and references run with {ctx.get('num_threads')} thread(s)",
        f"- harness: {settings.get('workers')} worker(s)"
        + (f" on Ray ({settings['ray_address']})" if settings.get("ray_address") else "")
        + f", budget {settings.get('problem_budget_s'):.0f} s per problem and mode; wall time {run['wall_s'] or 0:.0f} s",
        f"- {tc_note}",
    ]
    return [
        ("Run", overview),
        ("Table I", table_one(data["summaries"])),
        (
            "Ablation (the paper's Table I layout; unsolved = 1.0x)",
            table_ablation({m: s for m, s in data["summaries"].items() if m in ABLATION_MODES}),
        ),
        ("All metrics", table_full(data["summaries"], bool(ctx.get("price_table_path")))),
        ("Per category", table_categories(data["per_category"])),
        ("Figure 3: speedup distribution per category", "fig3_categories.png"),
        ("Figure 4: best-so-far by iteration", "fig4_iterations.png"),
        ("Figure 5: speedup per problem and mode", "fig5_problems.png"),
        (
            "Per problem (best speedup [95% CI] @attempt, or why not)",
            table_problems(data["problems"], data["all_modes"], data["attempts"]),
        ),
        ("Acceptance against the best (sequential testing)", sequential_lines(data["sequential"])),
        ("Conventions", [f"- {c}" for c in CONVENTIONS]),
    ]


def sequential_lines(sequential: dict[str, dict[str, int]]) -> list[str]:
    """One line per mode: how often the first batch could not decide and what more timing did."""
    lines = []
    for mode, s in sequential.items():
        if not s["head_to_head"]:
            lines.append(f"- {mode}: no correct attempt was timed against an earlier best")
            continue
        line = (
            f"- {mode}: {s['head_to_head']} correct attempt(s) timed against the best; the first batch left "
            f"{s['straddled']} undecided (CI straddling the bar)"
        )
        if s["straddled"]:
            line += (
                f"; extra batches decided {s['decided']} ({s['accepted']} accepted, {s['rejected']} rejected), "
                f"{s['undecided']} still straddled and were not accepted"
            )
        lines.append(line)
    return lines


def render_markdown(data: dict[str, Any]) -> str:
    note = partial_note(data["problems"])
    lines = [f"# Evaluation run `{data['run']['run_id']}`" + (f" ({note})" if note else ""), ""]
    for heading, content in _sections(data):
        lines += [f"## {heading}", ""]
        if isinstance(content, str):
            lines.append(f"![{heading}]({content})")
        elif isinstance(content, tuple):
            lines.append(md_table(content))
        else:
            lines += content
        lines.append("")
    return "\n".join(lines)


STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f2f0ff}"
    "img{max-width:100%}code{background:#f5f5f5;padding:0 .2em}"
)


def _inline_md(text: str) -> str:
    """The little Markdown the text lines use: `code` and **bold**."""
    out = html.escape(text.removeprefix("- "))
    for mark, tag in (("**", "b"), ("`", "code"), ("*", "i")):
        parts = out.split(mark)
        out = (
            "".join(p if i % 2 == 0 else f"<{tag}>{p}</{tag}>" for i, p in enumerate(parts)) if len(parts) % 2 else out
        )
    return out


def render_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    note = partial_note(data["problems"])
    body = [
        f"<h1>Evaluation run <code>{html.escape(data['run']['run_id'])}</code>"
        + (f" ({html.escape(note)})" if note else "")
        + "</h1>"
    ]
    for heading, content in _sections(data):
        body.append(f"<h2>{html.escape(heading)}</h2>")
        if isinstance(content, str):
            b64 = base64.b64encode(pngs[content]).decode()
            body.append(f'<img alt="{html.escape(heading)}" src="data:image/png;base64,{b64}">')
        elif isinstance(content, tuple):
            body.append(html_table(content))
        else:
            body.append("<ul>" + "".join(f"<li>{_inline_md(line)}</li>" for line in content) + "</ul>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>PRAGMA evaluation "
        f"{html.escape(data['run']['run_id'])}</title><style>{STYLE}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def write_report(run_id: str, out_dir: Path, results_url: str | None = None) -> list[Path]:
    data = build(run_id, results_url)
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = render_figures(data)
    written = []
    for name, blob in pngs.items():
        (out_dir / name).write_bytes(blob)
        written.append(out_dir / name)
    (out_dir / "report.md").write_text(render_markdown(data))
    (out_dir / "report.html").write_text(render_html(data, pngs))
    (out_dir / "summary.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "summaries": {
                    m: {**s, "fast": {str(k): v for k, v in s["fast"].items()}} for m, s in data["summaries"].items()
                },
            },
            indent=1,
        )
    )
    return written + [out_dir / "report.md", out_dir / "report.html", out_dir / "summary.json"]
