"""The profile ablation (issue 34) end to end: PRAGMA against its unprofiled and single-agent modes,
with a capable model answering through the relay, twice, and one report over both runs.

    python -m pragma.eval.ablation run [--kernelbench DIR] [--runs 2] [--iterations 4] [--out DIR]
    python -m pragma.eval.ablation report RUN [RUN ...] [--out DIR]

``run`` starts ``relay_openai.py`` (../shared/tools/; an OpenAI-compatible server that writes each
request to QUEUE/NNNN.prompt.md and returns the text someone writes to QUEUE/NNNN.answer.md) on a
free loopback port, points PRAGMA at it (``PRAGMA_LLM_BASE_URL``, model ``openai:relay``), runs
``pragma eval run`` with the modes pragma, no-profile and single-agent in the same run (the same
window and load), ``--torch-compile``, ``--runs`` times, then writes the combined report. It prints
where the prompts appear before the first one does.

Problems: KernelBench level 1 at CPU sizes (``--kernelbench``, ``$KERNELBENCH_DIR``, or a checkout
at ~/KernelBench or beside the repository) across element-wise, reduction, normalization,
pooling, matmul-like, loss and convolution; without a checkout, the repository's CPU suite
(eval/suites/cpu) problems of the same categories, and the report says which.

``report`` pools the runs: the paper's Table I layout per mode (success rate, geomean speedup,
LLM calls, tokens, wall time), the rerun spread, a figure of speedup per problem per mode, the
problems where pragma did not beat no-profile with the LLM logs to read, and the issue's target
(pragma geomean >= 1.3x no-profile's, success at least as high).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pragma.eval import figures, metrics, report, retime
from pragma.eval.report import ABLATION_MODES, ABLATION_REFERENCE, md_table, per_problem, table_ablation
from pragma.graph.clikit import console
from pragma.graph.clikit import out as results

MODES = ABLATION_MODES  # defined beside the table in report.py, which a run's report shows too
REFERENCE = ABLATION_REFERENCE  # what the profile's contribution is measured against
TARGET_RATIO = 1.3  # the bar: pragma's geomean at least this times no-profile's
ROOT = Path(__file__).resolve().parent.parent
REPO_SUITE = ROOT / "eval" / "suites" / "cpu"
# Sized so each reference takes about 1 ms or more (the file says why): at the check file's sizes the
# verifier's fixed cost per timed call squeezed every mode's speedup towards 1.0x.
KB_OVERRIDES = ROOT / "eval" / "suites" / "overrides" / "kernelbench_level1_cpu_timed.toml"
RELAY = ROOT.parent / "shared" / "tools" / "relay_openai.py"
RELAY_MODEL = "openai:relay"  # relay_openai.py lists one model, "relay"

# KernelBench level 1 (names relative to the checkout's KernelBench/ folder), by the categories.
KERNELBENCH_LEVEL1 = {
    "level1/19_ReLU": "element-wise",
    "level1/26_GELU_": "element-wise",
    "level1/47_Sum_reduction_over_a_dimension": "reduction",
    "level1/53_Min_reduction_over_a_dimension": "reduction",
    "level1/23_Softmax": "normalization",
    "level1/40_LayerNorm": "normalization",
    "level1/42_Max_Pooling_2D": "pooling",
    "level1/44_Average_Pooling_1D": "pooling",
    "level1/4_Matrix_vector_multiplication_": "matmul-like",
    "level1/94_MSELoss": "loss",
    "level1/100_HingeLoss": "loss",
    "level1/67_conv_standard_1D": "convolution",
}
# The repository's stand-ins (eval/suites/cpu), the same categories.
REPO_PROBLEMS = {
    "gelu_erf": "element-wise",
    "leaky_relu": "element-wise",
    "max_reduction": "reduction",
    "logsumexp": "reduction",
    "layer_norm": "normalization",
    "log_softmax": "normalization",
    "max_pool2d": "pooling",
    "avg_pool1d": "pooling",
    "matvec": "matmul-like",
    "mm_tall_skinny": "matmul-like",
    "cross_entropy_rows": "loss",
    "huber_elementwise": "loss",
    "conv1d": "convolution",
}

ANSWERING = """# Answering PRAGMA's prompts (the ablation of issue 34)

Each request PRAGMA sends appears here as NNNN.prompt.md (readable) and NNNN.request.json (raw).
Answer it by writing NNNN.answer.md; the relay returns its text as the model's reply. Write the
file whole at once (write a temporary name, then rename it): the relay reads it half a second
after it appears.

Answer as the capable model would: read only the prompt file, run no code, open no other file.

- Coder prompts ("You are the Coder"): the reply the prompt asks for, one fenced code block.
- Conductor prompts ("You are the Conductor"): the JSON object the prompt describes. When the
  prompt ends with "tools offered", the answer becomes the arguments of a tool call: write the
  JSON object alone (PRAGMA takes it as the answer), or, to look a metric up first, a first line
  `tool: lookup_profiler_metric` followed by `{"query": "METRIC"}` (the next prompt then holds
  the lookup's answer).
"""


class AblationError(RuntimeError):
    """A user mistake or a missing piece, said in one line."""


# --- problems -------------------------------------------------------------------------------------


@dataclass
class Selection:
    suite: Path
    names: list[str]  # problem names as the suite loader spells them
    categories: dict[str, str]  # name -> the category word
    overrides: Path | None
    note: str


def find_kernelbench(explicit: str | None) -> Path | None:
    """A KernelBench checkout: the folder holding level1/ (the checkout's KernelBench/)."""
    candidates = [explicit] if explicit else [os.environ.get("KERNELBENCH_DIR")]
    if not explicit:
        candidates += [str(Path.home() / "KernelBench"), str(ROOT.parent / "KernelBench")]
    for c in candidates:
        if not c:
            continue
        for root in (Path(c).expanduser() / "KernelBench", Path(c).expanduser()):
            if (root / "level1").is_dir():
                return root.resolve()
        if explicit:
            raise AblationError(f"no KernelBench level1/ folder under {c}")
    return None


def select_problems(kernelbench: str | None, suite: str | None, names: list[str], out_dir: Path) -> Selection:
    if suite:
        root = Path(suite).expanduser().resolve()
        if not root.is_dir():
            raise AblationError(f"suite directory not found: {root}")
        chosen = names or list(REPO_PROBLEMS)
        cats = {n: REPO_PROBLEMS[n] for n in chosen if n in REPO_PROBLEMS}  # else the suite's own category
        return Selection(root, chosen, cats, None, f"problems: {', '.join(chosen)} from {root}")
    kb = find_kernelbench(kernelbench)
    if kb is None:
        chosen = names or list(REPO_PROBLEMS)
        missing = [n for n in chosen if not (REPO_SUITE / f"{n}.py").is_file()]
        if missing:
            raise AblationError(f"not in {REPO_SUITE}: {', '.join(missing)}")
        note = (
            "no KernelBench checkout found (--kernelbench DIR, $KERNELBENCH_DIR, ~/KernelBench): using the "
            f"repository's CPU suite {REPO_SUITE} instead: "
            + ", ".join(f"{n} ({REPO_PROBLEMS.get(n, '?')})" for n in chosen)
        )
        return Selection(REPO_SUITE, chosen, {n: REPO_PROBLEMS.get(n, "?") for n in chosen}, None, note)
    chosen = names or list(KERNELBENCH_LEVEL1)
    present = [n for n in chosen if (kb / f"{n}.py").is_file()]
    if len(present) < len(chosen):
        absent = sorted(set(chosen) - set(present))
        results.print(f"not in the checkout, left out: {', '.join(absent)}")
    if not present:
        raise AblationError(f"none of the chosen KernelBench problems is under {kb}")
    out_dir.mkdir(parents=True, exist_ok=True)
    overrides = out_dir / "overrides.json"
    overrides.write_text(json.dumps(filtered_overrides(tomllib.loads(KB_OVERRIDES.read_text()), present), indent=1))
    refuse_undecidable(kb, present, overrides)
    note = f"KernelBench level 1 at CPU sizes ({KB_OVERRIDES.name}) from {kb}: " + ", ".join(
        f"{n} ({KERNELBENCH_LEVEL1.get(n, '?')})" for n in present
    )
    return Selection(kb, present, {n: KERNELBENCH_LEVEL1.get(n, "?") for n in present}, overrides, note)


def refuse_undecidable(kb: Path, names: list[str], overrides: Path) -> None:
    """Refuse, before any prompt, a problem whose sizes let one fixed output pass the verifier's
    tolerance (`pragma eval check`'s rule, the verifier's tolerance_discriminates). Why: the rerun of
    2026-11-27 sized softmax rows at 65536, every output ~1.5e-5 under atol, and every kernel of
    every mode was rejected; the run spent its prompts on a problem no agent could pass."""
    from pragma.eval import suite_check

    figures = suite_check.check_suite(kb, overrides, patterns=names)
    bad = [
        f"{name} ({suite_check.verdict(res)})"
        for name, res in figures.items()
        if "error" in res or not res["decidable"]
    ]
    if bad:
        raise AblationError(
            f"the verifier could not tell a fixed output from these at {KB_OVERRIDES.name}'s sizes: " + "; ".join(bad)
        )


def filtered_overrides(spec: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The overrides file with only the per-problem entries some chosen problem matches: the suite
    loader refuses patterns that match nothing (a typo there would silently keep a huge size)."""
    problems = {p: v for p, v in spec.get("problems", {}).items() if any(fnmatch.fnmatch(n, p) for n in names)}
    return {**spec, "problems": problems}


# --- the relay --------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Relay:
    """relay_openai.py in its own session on a loopback port; stopped by its process id."""

    def __init__(self, script: Path, queue: Path, wait_s: float, port: int = 0):
        if not script.is_file():
            raise AblationError(f"relay not found: {script} (pass --relay PATH)")
        self.queue, self.port = queue, port or free_port()
        queue.mkdir(parents=True, exist_ok=True)
        (queue / "ANSWERING.md").write_text(ANSWERING)
        self.log = open(queue / "relay.log", "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(self.port), str(queue), str(wait_s)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AblationError(f"the relay did not start on port {self.port} (see {queue / 'relay.log'})")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: the relay and nothing else
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


# --- running ------------------------------------------------------------------------------------


def eval_command(sel: Selection, run_id: str, args: argparse.Namespace, resume: bool) -> list[str]:
    cli = [sys.executable, "-m", "pragma.graph.cli", "eval", "run"]
    if resume:
        return [*cli, "--resume", run_id, "--workers", str(args.workers)]
    cmd = [*cli, str(sel.suite), "--run-id", run_id, "--workers", str(args.workers)]
    for mode in MODES:
        cmd += ["--mode", mode]
    for name in sel.names:
        cmd += ["--problems", name]
    if sel.overrides:
        cmd += ["--overrides", str(sel.overrides)]
    if args.torch_compile:
        cmd.append("--torch-compile")
    cmd += ["--max-iterations", str(args.iterations), "--problem-budget-s", str(args.problem_budget_s)]
    cmd += ["--coder-model", args.model, "--set", f"llm_timeout_s={args.answer_wait_s + 60:.0f}"]
    for s in args.set:
        cmd += ["--set", s]
    return cmd


def _run_exists(run_id: str) -> bool:
    from pragma.eval import harness

    try:
        harness.load_run(run_id)
        return True
    except harness.HarnessError:
        return False


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sel = select_problems(args.kernelbench, args.suite, args.problems, out)
    if len(sel.names) < 8 and not args.problems:
        raise AblationError(f"only {len(sel.names)} problems found; the ablation needs at least 8")
    results.print(sel.note)
    queue = Path(args.queue).resolve() if args.queue else out / "queue"
    relay = Relay(Path(args.relay), queue, args.answer_wait_s, args.port) if not args.no_relay else None
    env = dict(os.environ)
    if relay is not None:
        env.update(PRAGMA_LLM_BASE_URL=relay.url, PRAGMA_LLM_API_KEY="relay")
        results.print(
            f"relay on {relay.url}: prompts appear as {queue}/NNNN.prompt.md; answer each with "
            f"{queue}/NNNN.answer.md (rules: {queue / 'ANSWERING.md'}); each waits {args.answer_wait_s:.0f} s",
        )
    run_ids, status = [], 0
    try:
        for r in range(1, args.runs + 1):
            run_id = f"{args.run_prefix}-r{r}"
            resume = _run_exists(run_id)
            cmd = eval_command(sel, run_id, args, resume)
            results.print(f"run {r}/{args.runs}: {' '.join(cmd[2:])}")
            code = subprocess.run(cmd, env=env).returncode
            if code == 2:
                raise AblationError(f"pragma eval run refused run {run_id} (exit 2): see its message above")
            status = max(status, code)
            run_ids.append(run_id)
    finally:
        if relay is not None:
            relay.stop()
    retimed = None
    if args.retime:
        try:
            retimed = retime.retime(run_ids, out / "retime")
        except retime.RetimeError as exc:
            results.print(f"re-timing the final kernels failed: {exc}")
    written = write_report(run_ids, out / "report", categories=sel.categories, note=sel.note, retimed=retimed)
    for r in run_ids:
        subprocess.run([sys.executable, "-m", "pragma.graph.cli", "eval", "report", r, "--out", str(out / f"eval-{r}")])
    results.print("wrote " + ", ".join(str(p) for p in written))
    return status


# --- the report over runs ---------------------------------------------------------------------------


def combine(runs: list[list[metrics.Outcome]], modes: list[str]) -> dict[str, Any]:
    """Pooled summaries (every problem x run an outcome), each run's, the rerun spread and the target."""
    pooled = metrics.by_key([o for r in runs for o in r], "mode")
    summaries = {m: metrics.summarize(pooled.get(m, [])) for m in modes}
    each = [{m: metrics.summarize(metrics.by_key(r, "mode").get(m, [])) for m in modes} for r in runs]
    spread = {}
    for m in modes:
        geos = [s[m]["speedup_all"]["geomean"] for s in each if s[m]["problems"]]
        spread[m] = {"geomeans": geos, "max_over_min": (max(geos) / min(geos)) if geos and min(geos) else None}
    pr, ref = summaries.get("pragma"), summaries.get(REFERENCE)
    target: dict[str, Any] = {"ratio": None, "met": False}
    if pr and ref and pr["problems"] and ref["problems"]:
        ratio = pr["speedup_all"]["geomean"] / ref["speedup_all"]["geomean"]
        target = {
            "ratio": ratio,
            "success_pragma": pr["success_rate"],
            "success_reference": ref["success_rate"],
            "met": ratio >= TARGET_RATIO and pr["success_rate"] >= ref["success_rate"],
        }
    return {"summaries": summaries, "per_run": each, "spread": spread, "target": target}


def not_better(table: dict[str, dict[str, list[float | None]]]) -> list[tuple[str, list, list]]:
    """Problems where pragma's geomean over runs did not beat no-profile's (unsolved = 1.0x)."""
    found = []
    for problem, pr in sorted(table.get("pragma", {}).items()):
        ref = table.get(REFERENCE, {}).get(problem, [])
        if metrics.geomean(v or 1.0 for v in pr) <= metrics.geomean(v or 1.0 for v in ref or [1.0]):
            found.append((problem, pr, ref))
    return found


def _cells(values: list[float | None]) -> str:
    return " / ".join("unsolved" if v is None else f"{v:.2f}x" for v in values) or "-"


def render_markdown(data: dict[str, Any]) -> str:
    comb, runs = data["combined"], data["run_ids"]
    t = comb["target"]
    lines = [f"# Profile ablation over runs {', '.join(f'`{r}`' for r in runs)}", ""]
    if data.get("note"):
        lines += [f"- {data['note']}", ""]
    lines += [
        "## Table I layout (pooled over the runs; unsolved = 1.0x)",
        "",
        md_table(table_ablation(comb["summaries"])),
        "",
    ]
    for r, summaries in zip(runs, comb["per_run"], strict=True):
        lines += [f"### run `{r}`", "", md_table(table_ablation(summaries)), ""]
    lines += ["## Rerun spread (geomean speedup per run)", ""]
    for m, s in comb["spread"].items():
        geos = ", ".join(f"{g:.2f}x" for g in s["geomeans"]) or "n/a"
        moved = f"; max/min {s['max_over_min']:.2f}" if s["max_over_min"] else ""
        lines.append(f"- {m}: {geos}{moved}")
    lines += ["", "## Target (issue 34)", ""]
    if t["ratio"] is None:
        lines.append("- not measurable: pragma or no-profile has no outcome")
    else:
        lines.append(
            f"- pragma geomean / no-profile geomean = **{t['ratio']:.2f}** (target {TARGET_RATIO}); success "
            f"{t['success_pragma']:.0%} vs {t['success_reference']:.0%}: **{'met' if t['met'] else 'not met'}**"
        )
    table = data["per_problem"]
    modes = list(table)
    lines += ["", "## Speedup per problem (one value per run)", "", "![speedup per problem](fig_problems.png)", ""]
    header = ["Problem", "Category", *modes]
    rows = [
        [p, data["categories"].get(p, "?"), *(_cells(table[m].get(p, [])) for m in modes)]
        for p in sorted({p for m in modes for p in table[m]})
    ]
    lines += [md_table((header, rows)), ""]
    lines += ["## Where pragma did not beat no-profile (read the transcripts)", ""]
    worse = not_better(table)
    if not worse:
        lines.append("- none")
    for problem, pr, ref in worse:
        logs = ", ".join(f"`{p}`" for p in data["logs"].get(problem, []))
        lines.append(f"- {problem}: pragma {_cells(pr)}, no-profile {_cells(ref)}; LLM logs: {logs}")
    return "\n".join(lines) + "\n"


def build(
    run_ids: list[str], results_url: str | None = None, categories: dict[str, str] | None = None
) -> dict[str, Any]:
    from pragma.eval import store
    from pragma.eval.harness import HarnessError
    from pragma.nodes import recording

    runs, logs = [], {}
    for r in run_ids:
        try:
            data = report.build(r, results_url)
        except HarnessError as exc:
            raise AblationError(str(exc)) from None
        runs.append([o for o in data["outcomes"] if o.mode in MODES])
        for row in data["problems"]:
            if row["mode"] in ("pragma", REFERENCE):
                thread = row.get("thread_id") or store.thread_id(r, row["mode"], row["problem"])
                logs.setdefault(row["problem"], []).append(str(recording.log_path(thread)))
    modes = [m for m in MODES if any(o.mode == m for r in runs for o in r)]
    # The category words for the problems this script chooses; `ablation report` (no
    # selection) otherwise fell back to the suite's own ("others" for matrix-vector and MSE loss).
    known = {**KERNELBENCH_LEVEL1, **REPO_PROBLEMS, **(categories or {})}
    cats: dict[str, str] = {}
    for r in runs:
        for o in r:
            cats.setdefault(o.problem, known.get(o.problem, o.category))
    return {
        "run_ids": run_ids,
        "combined": combine(runs, modes),
        "per_problem": {m: per_problem(runs).get(m, {}) for m in modes},
        "categories": cats,
        "logs": logs,
    }


def write_report(
    run_ids: list[str],
    out_dir: Path,
    results_url: str | None = None,
    categories: dict[str, str] | None = None,
    note: str = "",
    retimed: list[dict[str, Any]] | None = None,
) -> list[Path]:
    data = build(run_ids, results_url, categories)
    data["note"] = note
    data["retimed"] = retimed or []
    out_dir.mkdir(parents=True, exist_ok=True)
    problems = sorted({p for m in data["per_problem"].values() for p in m})
    fig = out_dir / "fig_problems.png"
    fig.write_bytes(figures.problem_speedups(data["per_problem"], problems))
    md = out_dir / "ablation.md"
    md.write_text(render_markdown(data) + (f"\n{retime.render_markdown(retimed)}" if retimed else ""))
    js = out_dir / "ablation.json"
    js.write_text(
        json.dumps(
            {k: data[k] for k in ("run_ids", "combined", "per_problem", "categories", "logs", "retimed")},
            indent=1,
            default=str,
        )
    )
    return [md, fig, js]


# --- command line -----------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pragma.eval.ablation", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="start the relay, run the ablation (--runs times), write the report")
    r.add_argument("--kernelbench", help="KernelBench checkout (default: $KERNELBENCH_DIR, ~/KernelBench)")
    r.add_argument("--suite", help="a suite directory instead (names given with --problems or the repo defaults)")
    r.add_argument("--problems", action="append", default=[], help="problem name (repeatable; default: the list above)")
    r.add_argument("--runs", type=int, default=2, help="how many times to run the whole ablation (default 2)")
    r.add_argument("--iterations", type=int, default=4, help="attempt budget per problem and mode (default 4)")
    r.add_argument("--workers", type=int, default=2, help="jobs in parallel (default 2)")
    r.add_argument("--problem-budget-s", type=float, default=0.0, help="wall budget per job, 0 = none (default)")
    r.add_argument(
        "--no-torch-compile", dest="torch_compile", action="store_false", help="skip the torch.compile baseline"
    )
    r.add_argument("--model", default=RELAY_MODEL, help=f"model spec (default {RELAY_MODEL})")
    r.add_argument("--relay", default=str(RELAY), help="relay_openai.py to start")
    r.add_argument("--no-relay", action="store_true", help="use PRAGMA_LLM_BASE_URL as set; start no relay")
    r.add_argument("--port", type=int, default=0, help="relay port (default: a free one)")
    r.add_argument("--queue", help="where prompts appear and answers go (default OUT/queue)")
    r.add_argument("--answer-wait-s", type=float, default=3600.0, help="how long the relay waits for an answer")
    r.add_argument("--run-prefix", default=f"ablation-{time.strftime('%Y%m%d-%H%M%S')}", help="run ids: PREFIX-r1, ...")
    r.add_argument("--out", default="pragma-out/ablation", help="output directory")
    r.add_argument("--set", action="append", default=[], help="KEY=VALUE run setting, passed to pragma eval run")
    r.add_argument(
        "--no-retime",
        dest="retime",
        action="store_false",
        help="skip re-timing the final kernels head to head after the runs (eval/retime.py)",
    )
    rep = sub.add_parser("report", help="the combined report of finished (or partial) runs")
    rep.add_argument("run_ids", nargs="+")
    rep.add_argument("--out", default="pragma-out/ablation/report")
    rep.add_argument("--results-db", default=None)
    rep.add_argument(
        "--retime", action="store_true", help="re-time every mode's final kernel head to head first (eval/retime.py)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "run":
            if args.runs < 1 or args.iterations < 1 or args.workers < 1:
                raise AblationError("--runs, --iterations and --workers must be at least 1")
            return run(args)
        retimed = None
        if args.retime:
            try:
                retimed = retime.retime(args.run_ids, Path(args.out) / "retime")
            except retime.RetimeError as exc:
                raise AblationError(f"re-timing the final kernels: {exc}") from None
        elif (Path(args.out) / "retime" / "retime.json").is_file():
            retimed = json.loads((Path(args.out) / "retime" / "retime.json").read_text())
        written = write_report(args.run_ids, Path(args.out), args.results_db, retimed=retimed)
        results.print("wrote " + ", ".join(str(p) for p in written))
        return 0
    except AblationError as exc:
        console.print(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        console.print("interrupted: rerun the same command with --run-prefix to resume its runs")
        return 130


if __name__ == "__main__":
    sys.exit(main())
