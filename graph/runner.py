"""Drive one optimization run: start or resume a thread, print progress, write the outputs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from pragma.graph import lock, runs
from pragma.graph.builder import compile_app
from pragma.graph.context import Context, context_to_dict
from pragma.graph.report import write_outputs
from pragma.nodes import chat, llm
from pragma.tools.judging import acceptance


def check_models(ctx: Context, console: Console | None = None, *, start_local: bool = True) -> None:
    """Fail before any work when a role has no usable model (one-line LLMError). Loading the
    embedded model takes a while on first use: say so rather than sit silent.

    ``start_local=False`` (``pragma eval``, whose jobs each start their own server) only checks that
    the embedded model is installed: a server started here sat idle in the harness, ~2 GB, all run."""
    start = time.monotonic()
    local = llm.is_local(ctx.coder_model, "coder") and not ctx.coder_model.startswith("replay:")
    if not start_local:
        for spec, role in ((ctx.coder_model, "coder"), (ctx.conductor_model or ctx.coder_model, "conductor")):
            if (spec or llm.default_spec(role)).partition(":")[0] == "local":  # default_spec raises if none
                from pragma.nodes import local_model

                if not local_model.is_installed():
                    raise llm.LLMNotConfigured(llm.not_configured_message())
            else:
                llm.load_chat_model(spec, role=role, timeout_s=ctx.llm_timeout_s)
        return
    if local and console is not None:
        console.print("loading the embedded model (llama.cpp, Qwen2.5-Coder-1.5B) ...")
    llm.load_chat_model(ctx.coder_model, role="coder", timeout_s=ctx.llm_timeout_s)
    if local and console is not None:
        console.print(
            f"embedded model ready in {time.monotonic() - start:.1f} s "
            "(a few tokens per second on 2 cores: each call takes minutes)"
        )
    llm.load_chat_model(ctx.conductor_model or ctx.coder_model, role="conductor", timeout_s=ctx.llm_timeout_s)


def _best_text(best: dict[str, Any]) -> str:
    if not best.get("speedup"):
        return "no accepted best yet"
    return f"best {best['speedup']:.3f}x (attempt {best['iteration']})"


def not_accepted_reason(result: dict[str, Any], has_best: bool) -> str:
    """Why a correct attempt did not become the best, in the words progress and report.md use."""
    acceptance = str(result.get("acceptance") or "")
    if has_best and ("CI" in acceptance or "not above the best" in acceptance or not acceptance):
        return "not significantly faster than the best"
    return acceptance.removeprefix("not accepted: ") or "not accepted by the verifier"


def _call_progress(console: Console, event: Any) -> None:
    """A model call's start and end (events from nodes/chat.py's one call path): tokens per second."""
    if not isinstance(event, dict):
        return
    if event.get("event") == "llm_call":
        console.print(
            f"  {event.get('node')}: asking the {event.get('role')} model (attempt {event.get('attempt')}) ..."
        )
    elif event.get("event") == "llm_reply":
        wall_s, tokens = float(event.get("wall_s") or 0.0), float(event.get("output_tokens") or 0.0)
        rate = f", {tokens / wall_s:.1f} tokens/s" if wall_s > 0 and tokens > 0 else ""
        console.print(f"  {event.get('node')}: reply after {wall_s:.1f} s ({tokens:.0f} tokens{rate})")


def _progress(console: Console, node: str, update: dict[str, Any], best: dict[str, Any]) -> None:
    """One line per node. "best" is always the verifier's accepted best (state ``best``); a faster
    measurement the verifier did not accept is shown as such, never as the best."""
    if not isinstance(update, dict):
        return
    if node == "setup":
        p = update["problem"]
        timing = p.get("ref_call_timing") or {}
        how = f" (median of {timing['samples']} calls once warm)" if timing.get("samples") else ""
        console.print(
            f"problem {p['name']}: reference {p.get('ref_call_ms', 0):.2f} ms per call{how}; {update['hardware']}"
        )
    elif node == "plan":
        items = update.get("plan") or []
        if items:
            what = ", ".join(
                f"#{i['iteration']} " + (f"{i['mode']} of #{i['parent']}" if i["parent"] else "fresh start")
                for i in items
            )
            console.print(f"round {update['round']}: {len(items)} candidate(s) in parallel: {what}")
    elif node in ("verifier", "verify_next") and update.get("verification"):
        v = update["verification"]
        a = update["attempts"][0]
        text = f"attempt {a['iteration']} ({a['origin']}): {v['status']}"
        if v["status"] == "ok":
            text += f", speedup {v['speedup']:.3f}x ({v['runtime_ms']:.4f} ms vs {v['ref_runtime_ms']:.4f} ms)"
            # The profiler crowns exactly what the verifier accepted (tools/judging/acceptance.py, rule 5).
            update = {"speedup": v["speedup"]}
            if v.get("is_new_best") is not None:
                update["is_new_best"] = v["is_new_best"]
            if acceptance.replaces(best, update):
                best.update(speedup=v["speedup"], iteration=a["iteration"])
                text += ", the new best"
            else:
                text += f", {not_accepted_reason(v, bool(best.get('speedup')))}"
        else:
            text += f": {(v['message'].strip().splitlines() or [''])[0][:160]}"
        console.print(f"{text}; {_best_text(best)}")
    elif node == "tune" and (update.get("sweep") or {}).get("last"):
        console.print(f"  tune: {update['sweep']['last']}")
    elif node == "profiler":
        p = update["profile"]
        if update.get("best"):
            best.update(speedup=update["best"]["speedup"], iteration=update["best"]["iteration"])
        console.print(f"  profile: {p.get('bottleneck', 'unknown')} (confidence {p.get('confidence', 'none')})")
    elif node in ("conductor", "repair"):
        g = update["guidance"]
        first = (g.get("text", "").strip().splitlines() or [""])[0][:160]
        console.print(f"  {node}: {first}")
    elif node == "review":
        for r in update.get("reviews", []):
            first = ((r.get("guidance") or {}).get("text", "").strip().splitlines() or [""])[0][:140]
            profiled = (
                f"profile: {r['bottleneck']} (confidence {r.get('confidence', 'none')})" if "bottleneck" in r else ""
            )
            console.print(f"  review of #{r['iteration']}: " + "; ".join(x for x in (profiled, first) if x))


def _execute(thread_id: str, graph_input: Any, ctx: Context, out_dir: Path, console: Console) -> int:
    config = {"configurable": {"thread_id": thread_id}}
    best: dict[str, Any] = {}
    with runs.checkpointer() as saver:
        app = compile_app(saver)
        prior = app.get_state(config).values.get("best") or {}
        if prior:
            best.update(speedup=prior.get("speedup", 0.0), iteration=prior.get("iteration", 0))
        try:
            with chat.listening(lambda event: _call_progress(console, event)):
                for chunk in app.stream(graph_input, config, context=ctx, stream_mode="updates", durability="sync"):
                    for node, update in chunk.items():
                        _progress(console, node, update, best)
        except BaseException:
            state = app.get_state(config).values
            runs.update(
                thread_id,
                status="stopped",
                best_speedup=(state.get("best") or {}).get("speedup", 0.0),
                iterations=state.get("iteration", 0),
            )
            console.print(f"run {thread_id} stopped; resume with: pragma optimize --resume {thread_id}")
            raise
        state = app.get_state(config).values
    best_state = state.get("best") or {}
    runs.update(
        thread_id, status="finished", best_speedup=best_state.get("speedup", 0.0), iterations=state.get("iteration", 0)
    )
    written = write_outputs(state, ctx, thread_id, out_dir)
    if best_state:
        console.print(f"best: attempt {best_state['iteration']}, {best_state['speedup']:.3f}x over PyTorch")
    else:
        console.print(f"no correct kernel found: {_why_none(state)}")
    console.print("wrote " + ", ".join(str(p) for p in written))
    if llm.is_local(ctx.coder_model, "coder") and not ctx.coder_model.startswith("replay:"):
        console.print(
            "next: point PRAGMA_LLM_BASE_URL (and PRAGMA_CODER_MODEL) at a larger model for faster "
            "kernels; compare agents on a suite with: pragma eval run eval/suites/cpu"
        )
    return 0 if best_state else 1


def _why_none(state: dict[str, Any]) -> str:
    """The plain reason a run ended without a kernel: what its last attempt got from the verifier."""
    attempts = state.get("attempts") or []
    if not attempts:
        return "no attempt was made"
    last = attempts[-1]
    status = last.get("status") or (last.get("verification") or {}).get("status") or "unknown"
    message = str(last.get("message") or (last.get("verification") or {}).get("message") or "")
    first = (message.strip().splitlines() or [""])[0][:160]
    return f"{len(attempts)} attempt(s), the last one {status}" + (f" ({first})" if first else "")


def start_run(problem: dict[str, Any], ctx: Context, out_dir: Path | None, console: Console) -> int:
    check_models(ctx, console)
    thread_id = runs.new_thread_id(problem["name"])
    out_dir = (out_dir or Path("pragma-out") / thread_id).resolve()
    with lock.hold(thread_id):
        runs.register(thread_id, problem["path"], str(out_dir), context_to_dict(ctx))
        console.print(f"run {thread_id} (resume with: pragma optimize --resume {thread_id})")
        return _execute(thread_id, {"problem": {"path": problem["path"]}}, ctx, out_dir, console)


def replay_run(source_thread: str, out_dir: Path | None, console: Console) -> int:
    """Re-run a recorded run's whole loop against its logged LLM replies (no model is called)."""
    from pragma.graph.clikit import UserError

    row = runs.get(source_thread)
    if row is None:
        raise UserError(f"no run with thread id {source_thread!r} to replay (see: pragma runs)")
    settings = json.loads(row["context_json"])
    settings.update(coder_model=f"replay:{source_thread}", conductor_model=f"replay:{source_thread}")
    ctx = Context(**settings)
    check_models(ctx, console)
    thread_id = f"{source_thread}-replay-{runs.new_thread_id('x').rsplit('-', 1)[-1]}"
    out_dir = (out_dir or Path("pragma-out") / thread_id).resolve()
    with lock.hold(thread_id):
        runs.register(thread_id, row["problem_path"], str(out_dir), context_to_dict(ctx))
        console.print(f"run {thread_id} replays {source_thread} (resume with: pragma optimize --resume {thread_id})")
        return _execute(thread_id, {"problem": {"path": row["problem_path"]}}, ctx, out_dir, console)


def resume_run(thread_id: str, console: Console) -> int:
    from pragma.graph.clikit import UserError

    row = runs.get(thread_id)
    if row is None:
        raise UserError(f"no run with thread id {thread_id!r} (see: pragma runs)")
    # Taken before anything else: a second process on a live run writes nothing and calls no model.
    with lock.hold(thread_id):
        ctx = Context(**json.loads(row["context_json"]))
        check_models(ctx, console)
        console.print(f"resuming run {thread_id}")
        return _execute(thread_id, None, ctx, Path(row["out_dir"]), console)
