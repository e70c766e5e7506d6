"""``pragma knowledge``: build the compendium store, query it, show one metric.

Exit codes follow the main CLI: 0 success, 1 the work failed (unreachable source, LLM failure),
2 bad input (one-line error). Heavy imports happen inside commands so ``pragma --help`` stays fast.
"""

from __future__ import annotations

import json
import logging

import typer

from pragma.graph.clikit import UserError, out
from pragma.graph.clikit import console as err

knowledge_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Profiler knowledge compendium (Chroma store): build, query, show."
)
log = logging.getLogger(__name__)


def _user_error(message: str) -> Exception:
    return UserError(message)


def _backend(value: str | None) -> str | None:
    if value in (None, ""):
        return None
    if value not in ("cpu", "gpu"):
        raise _user_error(f"--backend must be cpu or gpu, not {value!r}")
    return value


def _bottleneck(value: str | None) -> str | None:
    from pragma.tools.profilers.bottleneck import VOCABULARY

    if value in (None, ""):
        return None
    if value not in VOCABULARY:
        raise _user_error(f"--bottleneck must be one of: {', '.join(VOCABULARY)}")
    return value


def _fail(message: str) -> None:
    err.print(f"error: {message}")
    raise typer.Exit(1)


@knowledge_app.command()
def build(
    crawl: bool = typer.Option(False, "--crawl", help="Fetch the registered documentation sources first."),
    consolidate: bool = typer.Option(
        False, "--consolidate", help="Summarize crawled segments with the LLM (map + reduce)."
    ),
    local_only: bool = typer.Option(
        False, "--local-only", help="Crawl only offline sources (perf list, man pages, ncu)."
    ),
    refresh: bool = typer.Option(False, "--refresh", help="Fetch sources again instead of using the raw-page cache."),
    profiler: list[str] = typer.Option(
        [], "--profiler", help="Limit the crawl to these registry entries (repeatable)."
    ),
    model: str | None = typer.Option(
        None, "--model", help="'provider:model' for consolidation (default: the Conductor's)."
    ),
) -> None:
    """Build the store from the seed compendium, optionally crawling and consolidating first."""
    from pragma.knowledge import consolidate as cons
    from pragma.knowledge import crawler, paths, sources, store
    from pragma.knowledge.seed import load_seed

    try:
        chosen = [sources.profiler(p) for p in profiler] or None
    except KeyError as exc:
        raise _user_error(str(exc.args[0])) from None
    if crawl:
        try:
            result = crawler.crawl(chosen, local_only=local_only, refresh=refresh)
        except crawler.CrawlError as exc:
            _fail(str(exc))
        crawler.save_segments(result)
        out.print(f"crawl: {result.pages} page(s), {len(result.segments)} segment(s)")
        for note in result.notes:
            out.print(f"  note: {note}")
    if consolidate:
        segments = crawler.load_segments()
        if not segments:
            raise _user_error("no crawled segments yet: run `pragma knowledge build --crawl --consolidate`")
        from pragma.graph.context import resolve_context

        ctx = resolve_context()
        spec = model or ctx.conductor_model or ctx.coder_model
        from pragma.nodes import llm

        if not spec:
            raise llm.LLMNotConfigured(llm.not_configured_message())
        try:
            report = cons.consolidate(segments, cons.make_asker(spec, ctx.llm_timeout_s))
        except cons.ConsolidationError as exc:
            _fail(str(exc))
        cons.save_consolidated(report.entries)
        out.print("consolidation: " + json.dumps(report.summary()))
    crawled = cons.load_consolidated()
    report = store.build(load_seed(), crawled)
    out.print(
        f"store: {report.entries} entries ({report.seed_entries} seed, {report.crawled_entries} crawled) "
        f"built in {report.build_s:.1f} s ({report.embedded_now} embedded now) at {paths.chroma_dir()}"
    )


@knowledge_app.command()
def query(
    text: str = typer.Argument(..., help="A question or symptom in words, or a metric name."),
    backend: str | None = typer.Option(None, "--backend", help="cpu or gpu."),
    bottleneck: str | None = typer.Option(None, "--bottleneck", help="Only entries diagnosing this class."),
    k: int = typer.Option(3, "--k", min=1, max=20, help="Number of results."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Semantic search (exact metric names first), filtered by backend and bottleneck."""
    from pragma.knowledge import retrieval

    if not text.strip():
        raise _user_error("query text is empty")
    hits = retrieval.find(text, backend=_backend(backend), bottleneck=_bottleneck(bottleneck), k=k)
    if as_json:
        out.print_json(json.dumps([{"score": h.score, "how": h.how, **h.entry.model_dump()} for h in hits]))
        return
    if not hits:
        out.print("no matching entries")
    for h in hits:
        out.print(f"[{h.how} {h.score:.2f}] {h.entry.render()}\n")


@knowledge_app.command()
def show(
    metric: str = typer.Argument(..., help="Metric name as a profile shows it (any spelling of it)."),
    backend: str | None = typer.Option(None, "--backend", help="cpu or gpu."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Print the compendium entry for METRIC (exact lookup)."""
    import difflib

    from pragma.knowledge import retrieval

    index, _, _ = retrieval.load_index()
    entries = index.lookup(metric, _backend(backend))
    if not entries:
        close = difflib.get_close_matches(metric, sorted({e.metric for e in index.entries}), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; try `pragma knowledge query`"
        raise _user_error(f"no compendium entry named {metric!r}{hint}")
    if as_json:
        out.print_json(json.dumps([e.model_dump() for e in entries]))
        return
    out.print("\n\n".join(e.render() for e in entries))


kernels_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Memory of verified kernels (Chroma collection pragma_kernels): list, query.",
)
knowledge_app.add_typer(kernels_app, name="kernels")


def _kernel_row(r: dict) -> str:
    return (
        f"{r.get('category') or '-':<14} {r.get('name', ''):<24} {float(r.get('speedup', 0.0)):6.2f}x  "
        f"{r.get('format', ''):<6} {r.get('origin', ''):<4}  {r.get('profile_summary', '')}"
    )


@kernels_app.command("list")
def kernels_list(as_json: bool = typer.Option(False, "--json", help="Print JSON (with the code).")) -> None:
    """Every verified kernel in the memory (shipped seeds and runs' accepted bests)."""
    from pragma.knowledge import kernels

    rows = kernels.listing()
    if as_json:
        out.print_json(json.dumps(rows))
        return
    out.print(f"{'category':<14} {'problem':<24} {'speedup':>7}  format origin profile")
    for r in rows:
        out.print(_kernel_row(r))


@kernels_app.command("query")
def kernels_query(
    problem: str = typer.Argument(..., help="A problem file (KernelBench format) or a description in words."),
    k: int = typer.Option(2, "--k", min=1, max=20, help="Number of results."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (with the code)."),
) -> None:
    """The verified kernels whose problems read most like PROBLEM (what the Coder would be shown)."""
    from pathlib import Path

    from pragma.knowledge import kernels

    path = Path(problem).expanduser()
    text = path.read_text() if path.suffix == ".py" and path.is_file() else problem
    if path.suffix == ".py" and not path.is_file():
        raise _user_error(f"problem file not found: {path}")
    if not text.strip():
        raise _user_error("query text is empty")
    hits = kernels.query(text, k=k)
    if as_json:
        out.print_json(json.dumps(hits))
        return
    if not hits:
        out.print("the kernel memory is empty")
    for r in hits:
        out.print(f"[distance {r['distance']:.3f}] {_kernel_row(r)}\n{r.get('code', '')}")
