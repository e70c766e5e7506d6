"""coder (LLM): write the first candidate, repair the failed one, or refine the historical best."""

from __future__ import annotations

import json

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.nodes import chat, prompts
from pragma.tools.backends import backend_for
from pragma.tools.extract import ExtractionError, extract_code, strip_reasoning


def _inputs_text(problem: dict) -> str:
    return json.dumps({"inputs": problem.get("inputs", []), "init_inputs": problem.get("init_inputs", [])})


def _feedback(state: PragmaState, last: dict) -> dict:
    """The previous candidate and its verifier result, for the single-agent prompt."""
    history = "\n".join(f"attempt {a['iteration']}: {a['status']}, speedup {a['speedup']:.3f}x"
                        for a in state.get("attempts", []))
    return {"previous": state["candidate"]["iteration"], "code": prompts.failed_code(state["candidate"]),
            "status": last.get("status", ""), "message": last.get("message", ""),
            "log_tail": (last.get("log_tail") or "")[-3000:], "speedup": last.get("speedup", 0.0),
            "runtime_ms": last.get("runtime_ms", 0.0), "ref_runtime_ms": last.get("ref_runtime_ms", 0.0),
            "max_abs_diff": last.get("max_abs_diff", 0.0), "history": history,
            "best_speedup": (state.get("best") or {}).get("speedup", 0.0)}


def coder(state: PragmaState, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    attempt = state.get("iteration", 0) + 1
    problem = state["problem"]
    common = {"attempt": attempt, "name": problem["name"], "source": problem["source"],
              "inputs": _inputs_text(problem), "hardware": state.get("hardware", "")}
    guidance = state.get("guidance") or {}
    best = state.get("best") or {}
    last = state.get("verification") or {}
    if ctx.agent_mode == "single-agent" and state.get("candidate"):
        # KernelBench multi-turn: the Coder itself reads the compiler/correctness/runtime feedback.
        origin = "refine" if last.get("status") == "ok" else "repair"
        human = prompts.CODER_FEEDBACK.format(**common, **_feedback(state, last))
    elif guidance.get("mode") == "repair" and last.get("status") not in (None, "ok"):
        origin = "repair"
        human = prompts.CODER_REPAIR.format(**common, status=last["status"],
                                            code=prompts.failed_code(state["candidate"]),
                                            guidance=guidance["text"])
    elif best.get("code") and guidance.get("text"):
        origin = "refine"
        human = prompts.CODER_REFINE.format(**common, best_speedup=best["speedup"],
                                            best_runtime_ms=best["runtime_ms"], best_code=best["code"],
                                            guidance=guidance["text"])
    else:
        origin = "initial"
        human = prompts.CODER_FIRST.format(**common)
    # The backend decides the kernel language (C++ on cpu, Triton on gpu); the templates are shared.
    text, update = chat.ask("coder", ctx, backend_for(ctx).coder_system, human, attempt)
    candidate = {"iteration": attempt, "origin": origin}
    try:
        candidate["code"] = extract_code(text)
    except ExtractionError as exc:
        # An unusable reply is a failed candidate; the verifier reports it and repair follows,
        # quoting the reply itself rather than this placeholder.
        candidate["code"] = f"# PRAGMA: {exc}\nraise SyntaxError({str(exc)!r})\n"
        candidate["unusable_reply"] = strip_reasoning(text)[: prompts.UNUSABLE_REPLY_CHARS]
    return {**update, "iteration": attempt, "candidate": candidate}
