"""``pragma eval``: run a suite in the three agent modes, resume a run, write its report.

Exit codes as the rest of the CLI: 0 done, 1 the run ended with unfinished jobs, 2 bad input
(one-line error).
"""

from __future__ import annotations

from pathlib import Path

import typer

from pragma.graph.clikit import SETTINGS_HELP, UserError, console, context, out
from pragma.graph.clikit import settings as set_pairs

eval_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Evaluate agents on benchmark suites (the paper's Table I and figures).",
)


def _harness_errors():
    from pragma.eval.harness import HarnessError
    from pragma.eval.suites import SuiteError

    return HarnessError, SuiteError


@eval_app.command("run")
def run(
    suite_dir: Path | None = typer.Argument(
        None, help="Directory of KernelBench-format problems (searched recursively)."
    ),
    mode: list[str] = typer.Option(
        [], "--mode", help="pragma | no-profile | single-agent, optionally +beam or +tree (repeatable; default pragma)."
    ),
    search: list[str] = typer.Option(
        [],
        "--search",
        help="greedy | beam | tree (repeatable): every --mode runs with each (modes pragma, pragma+beam, ...). "
        "Equal LLM-call budgets: --set max_llm_calls=N.",
    ),
    workers: int | None = typer.Option(None, "--workers", help="Jobs in parallel on this machine (default 2)."),
    resume: str | None = typer.Option(
        None, "--resume", help="Continue run RUN: skip finished jobs, resume the others."
    ),
    overrides: Path | None = typer.Option(
        None, "--overrides", help="JSON/TOML file overriding module-level size globals."
    ),
    max_iterations: int | None = typer.Option(
        None, "--max-iterations", help="Attempt budget per problem, every mode (default 15)."
    ),
    problems: list[str] = typer.Option(
        [], "--problems", help="Only problems whose name matches this glob (repeatable)."
    ),
    run_id: str | None = typer.Option(None, "--run-id", help="Name the new run (default: a timestamp)."),
    budget_s: float = typer.Option(
        3600.0, "--problem-budget-s", help="Hard wall-time budget per problem x mode, seconds."
    ),
    torch_compile: bool = typer.Option(
        False, "--torch-compile", help="Also measure the torch.compile baseline (cached per machine)."
    ),
    ray: str | None = typer.Option(
        None, "--ray", help="Run one Ray task per job on this cluster ('auto', 'ray://HOST:10001', or 'local')."
    ),
    results_db: str | None = typer.Option(
        None, "--results-db", help="Results database: SQLite path or postgresql:// URL."
    ),
    checkpoint_db: str | None = typer.Option(
        None, "--checkpoint-db", help="Checkpointer: SQLite path or postgresql:// URL."
    ),
    coder_model: str | None = typer.Option(None, "--coder-model", help="'provider:model' for the Coder."),
    conductor_model: str | None = typer.Option(None, "--conductor-model", help="'provider:model' for the Conductor."),
    setting: list[str] = typer.Option([], "--set", help=SETTINGS_HELP),
) -> None:
    """Run SUITE_DIR in the given modes (or continue a run with --resume RUN)."""
    from pragma.eval import harness

    errors = _harness_errors()
    if workers is not None and workers < 1:
        raise UserError("--workers must be at least 1")
    if budget_s < 0:
        raise UserError("--problem-budget-s must be >= 0 (0: no budget)")
    try:
        if resume:
            if suite_dir is not None or mode or search or overrides or problems or run_id:
                raise UserError(
                    "--resume RUN continues a run with its own suite, modes and settings; "
                    "give only --workers, --ray or --results-db with it"
                )
            run_name = resume
            harness.ensure_not_running(run_name)  # one line naming the live process, nothing written
        else:
            if suite_dir is None:
                raise UserError("give a SUITE_DIR, or --resume RUN")
            # Compared modes and runs must not hand each other kernels through the kernel memory:
            # the shipped kernels only, nothing added, unless --set kernel_memory_shared=true.
            shared = set_pairs(setting).get("kernel_memory_shared", False)
            ctx = context(
                setting,
                max_iterations=max_iterations,
                coder_model=coder_model,
                conductor_model=conductor_model,
                kernel_memory_shared=shared,
            )
            if ctx.max_iterations < 1:
                raise UserError("--max-iterations must be at least 1")
            from pragma.graph.runner import check_models

            check_models(ctx, start_local=False)  # each job starts its own embedded server
            settings = harness.RunSettings(
                workers=workers or 2,
                problem_budget_s=budget_s,
                results_url=results_db or "",
                checkpoint_url=checkpoint_db or "",
                ray_address=ray,
                torch_compile=torch_compile,
            )
            run_name = harness.create_run(
                str(suite_dir.resolve()),
                mode,
                ctx,
                settings,
                overrides=str(overrides) if overrides else None,
                patterns=problems or None,
                run_id=run_id,
                searches=search or None,
            )
        out.print(f"evaluation run {run_name} (continue with: pragma eval run --resume {run_name})")
        counts = harness.execute(run_name, console, results_url=results_db, workers=workers, ray_address=ray)
    except errors as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        console.print(f"interrupted; continue with: pragma eval run --resume {run_name}")
        raise typer.Exit(130) from None
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing left to do"
    out.print(f"run {run_name}: {summary}; report with: pragma eval report {run_name}")
    unfinished = counts.get("error", 0) + counts.get("interrupted", 0) + counts.get("locked", 0)
    raise typer.Exit(1 if unfinished else 0)


@eval_app.command("report")
def report(
    run_id: str = typer.Argument(..., help="Evaluation run id (see: pragma eval runs)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Output directory (default ./pragma-out/eval-RUN)."),
    results_db: str | None = typer.Option(
        None, "--results-db", help="Results database: SQLite path or postgresql:// URL."
    ),
) -> None:
    """Write report.md and report.html (Table I, Figure 3, Figure 4) for RUN."""
    from pragma.eval.report import write_report

    errors = _harness_errors()
    try:
        written = write_report(run_id, out_dir or Path("pragma-out") / f"eval-{run_id}", results_db)
    except errors as exc:
        raise UserError(str(exc)) from None
    out.print("wrote " + ", ".join(str(p) for p in written))


@eval_app.command("runs")
def runs(results_db: str | None = typer.Option(None, "--results-db", help="Results database.")) -> None:
    """List evaluation runs."""
    from pragma.eval import store
    from pragma.eval.db import ResultsDB, loads

    db = ResultsDB(results_db or store.default_results_url())
    rows = db.runs()
    if not rows:
        out.print("no evaluation runs yet")
    for r in rows:
        jobs = db.query(
            "SELECT status, COUNT(*) AS n FROM eval_problems WHERE run_id=? GROUP BY status", (r["run_id"],)
        )
        counts = ", ".join(f"{j['n']} {j['status']}" for j in jobs)
        out.print(
            f"{r['run_id']}  {r['status']:<10} modes {','.join(loads(r['modes_json'], []))}  {counts}  {r['suite_dir']}"
        )


@eval_app.command("check")
def check(
    suite_dir: Path = typer.Argument(..., help="Suite directory (PRAGMA's or a KernelBench checkout)."),
    overrides: Path | None = typer.Option(
        None, "--overrides", help="JSON/TOML file overriding module-level size globals."
    ),
    time_refs: bool = typer.Option(False, "--time", help="Also time each reference at 1 and 2 threads."),
    json_out: Path | None = typer.Option(None, "--json", help="Write every problem's figures to this JSON file."),
) -> None:
    """Check a suite: every problem loads, and no fixed output (zeros, a constant, anything that
    ignores the inputs) passes the tolerance on its trials and stress variants.

    Exit 1 when a problem cannot load or cannot discriminate. Runs the problems in this process:
    use it on suites you trust."""
    from pragma.eval import suite_check

    _, suite_error = _harness_errors()
    try:
        figures = suite_check.check_suite(
            str(suite_dir),
            str(overrides) if overrides else None,
            time_refs=time_refs,
            on_problem=lambda p, res: suite_check.render_row(p, res, out),
        )
    except suite_error as exc:
        raise UserError(str(exc)) from None
    line, code = suite_check.summary(figures)
    out.print(line, soft_wrap=True)
    if json_out:
        suite_check.write_json(json_out, figures)
    raise typer.Exit(code)
