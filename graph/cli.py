"""The ``pragma`` command line: optimize, verify, profile, runs.

Exit codes (graph/clikit.py, the same for every command): 0 success (a correct kernel), 1 the
candidate/run produced no correct kernel, 2 bad invocation or unusable problem (one line), 130/143 stopped.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from pragma.eval.cli import eval_app
from pragma.graph.clikit import (
    SETTINGS_HELP,
    UserError,
    context,
    out,
    read_candidate,
    read_problem,
    run,
)
from pragma.knowledge.cli import knowledge_app

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="PRAGMA: profile-guided multi-agent kernel optimization.",
)
app.add_typer(knowledge_app, name="knowledge")
app.add_typer(eval_app, name="eval")


@app.command()
def verify(
    problem: Path = typer.Argument(..., help="KernelBench-format problem file (Model, get_inputs, get_init_inputs)."),
    candidates: list[Path] = typer.Argument(
        ...,
        metavar="CANDIDATE...",
        help="Python module(s) defining ModelNew. Several are verified one after another in this "
        "process (the sandbox's pre-started judge is reused: about 2 s less per candidate).",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object per candidate (one per line; with several, each names its file)."
    ),
    best: Path | None = typer.Option(
        None,
        "--best",
        help="The current best ModelNew: timed in the same "
        "rounds; is_new_best says whether CANDIDATE beats it significantly.",
    ),
    setting: list[str] = typer.Option([], "--set", help=SETTINGS_HELP),
) -> None:
    """Compile, check and time each CANDIDATE against PROBLEM's reference in the sandbox.

    Exit code 0 when every candidate is correct, 1 when one is not, 2 for a bad invocation."""
    from pragma.tools.verify import verify_candidate

    ctx = context(setting)
    prob = read_problem(problem)
    codes = [read_candidate(c) for c in candidates]  # every file read before the first verification
    best_code = read_candidate(best) if best else None
    several = len(candidates) > 1
    all_ok = True
    for path, code in zip(candidates, codes, strict=True):
        result = verify_candidate(prob["path"], code, ctx, best_code=best_code)
        if result.get("failed_phase") == "load_problem":
            raise UserError(f"{prob['path']}: the reference fails to load: {result['message'].splitlines()[0][:300]}")
        all_ok = all_ok and result["status"] == "ok"
        if as_json:
            # One line per object: a consumer reads several results as JSON Lines.
            out.out(json.dumps({"candidate": str(path), **result} if several else result))
        else:
            out.print((f"{path}: " if several else "") + _verdict_text(result, bool(best_code)))
    raise typer.Exit(0 if all_ok else 1)


def _verdict_text(result: dict, with_best: bool) -> str:
    line = f"{result['status']}: {result['message']}"
    if result["status"] == "ok":
        low, high = result["speedup_ci"]
        line += (
            f"\nspeedup {result['speedup']:.3f}x (95% CI {low:.3f}-{high:.3f})  candidate "
            f"{result['runtime_ms']:.4f} ms  reference {result['ref_runtime_ms']:.4f} ms  "
            f"(medians of {len(result['samples_ms']['candidate'])}, {result['num_threads']} thread(s))"
        )
        if with_best:
            low, high = result["speedup_vs_best_ci"]
            line += f"\nvs best {result['speedup_vs_best']:.3f}x (95% CI {low:.3f}-{high:.3f}): {result['acceptance']}"
    warned = [c["rule"] for c in result["checks"] if c["verdict"] == "warn"]
    if warned:
        line += f"\nwarnings: {', '.join(warned)}"
    return line


@app.command()
def profile(
    problem: Path = typer.Argument(..., help="KernelBench-format problem file."),
    candidate: Path = typer.Argument(..., help="Python module defining ModelNew."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    events: str = typer.Option(
        "",
        "--events",
        help="Extra perf events, perf metric groups or PRAGMA metric "
        "names, comma-separated (e.g. dTLB-load-misses,TopdownL2,sim_d1_misses).",
    ),
    setting: list[str] = typer.Option([], "--set", help=SETTINGS_HELP),
) -> None:
    """Profile CANDIDATE: perf over the kernel region (counters, top-down, or software events and
    callgrind simulation where counters are missing), hot spots, vectorization report, instruction
    mix, roofline and bottleneck class, with the profile's sources and confidence."""
    from pragma.tools.backends import backend_for
    from pragma.tools.profilers.extra import split_names

    ctx = context(setting)
    prob = read_problem(problem)
    code = read_candidate(candidate)
    extra = split_names(events)
    backend = backend_for(ctx)
    result = backend.profile(prob["path"], code, ctx, extra)
    if as_json:
        out.print_json(json.dumps(result))
    else:
        out.print(backend.render_profile(result))
    raise typer.Exit(0 if result.get("status") == "ok" else 1)


@app.command()
def optimize(
    problem: Path | None = typer.Argument(None, help="KernelBench-format problem file."),
    out_dir: Path | None = typer.Option(None, "--out", help="Output directory (default ./pragma-out/THREAD_ID)."),
    resume: str | None = typer.Option(None, "--resume", help="Continue an interrupted run by its thread id."),
    replay: str | None = typer.Option(None, "--replay", help="Re-run a recorded run on its logged LLM replies."),
    max_iterations: int | None = typer.Option(None, "--max-iterations", help="Candidates to write (default 15)."),
    coder_model: str | None = typer.Option(None, "--coder-model", help="'provider:model' for the Coder."),
    conductor_model: str | None = typer.Option(None, "--conductor-model", help="'provider:model' for the Conductor."),
    setting: list[str] = typer.Option([], "--set", help=SETTINGS_HELP),
) -> None:
    """Run the PRAGMA loop on PROBLEM; writes best.py and report.md."""
    from pragma.graph import runner

    if resume and replay:
        raise UserError("give either --resume or --replay, not both")
    if resume:
        code = runner.resume_run(resume, out)
    elif replay:
        code = runner.replay_run(replay, out_dir, out)
    else:
        if problem is None:
            raise UserError("give a PROBLEM file, or --resume THREAD_ID")
        prob = read_problem(problem)
        ctx = context(setting, max_iterations=max_iterations, coder_model=coder_model, conductor_model=conductor_model)
        code = runner.start_run(prob, ctx, out_dir, out)
    raise typer.Exit(code)


@app.command()
def runs() -> None:
    """List runs (thread ids), their status and the verifier's accepted best speedup."""
    from pragma.graph import runs as registry

    rows = registry.list_runs()
    if not rows:
        out.print("no runs yet")
        return
    for r in registry.with_live_status(rows):
        best = f"best {r['best_speedup']:.3f}x" if r["best_speedup"] else "no accepted best"
        out.print(
            f"{r['thread_id']}  {r['status']:<9} {best}  "
            f"{r['iterations']} candidates  {r['problem_path']}  -> {r['out_dir']}"
        )


@app.command()
def doctor(setting: list[str] = typer.Option([], "--set", help=SETTINGS_HELP)) -> None:
    """Check the LLM endpoint, compiler, perf/valgrind, knowledge store and checkpointer."""
    from pragma.graph.doctor import run_checks

    checks = run_checks(context(setting))
    from rich.text import Text

    marks = {"ok": ("ok  ", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red")}
    for c in checks:
        line = Text(marks[c.verdict][0], style=marks[c.verdict][1]) + Text(f" {c.name:<12} {c.detail}")
        out.print(line)
        if c.fix and c.verdict != "ok":
            out.print(f"     fix: {c.fix}")
    raise typer.Exit(1 if any(c.verdict == "fail" for c in checks) else 0)


def main() -> None:
    run(app)


if __name__ == "__main__":
    main()
