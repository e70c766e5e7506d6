"""conductor (LLM): compare the candidate's profile with the best's and plan the next step.

The prompt carries a bounded <profiler_knowledge> section: compendium entries for the metrics the
profiles hold and for the diagnosed bottleneck. Models that support tool calling may also look up
any other metric with ``lookup_profiler_metric`` before answering.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from pragma.graph.context import Context
from pragma.graph.routing import stop_verdict
from pragma.graph.state import PragmaState, add_usage
from pragma.nodes import chat, llm, playbook, prompts, recording, structured, verdict
from pragma.tools.backends import render_profile  # cpu or gpu, as the profile says
from pragma.tools.extract import strip_reasoning
from pragma.tools.judging import acceptance
from pragma.tools.profilers.bottleneck import VOCABULARY

log = logging.getLogger(__name__)
_NO_TOOLS: set[str] = set()  # model specs whose server refused tools once: not offered again


class ConductorGuidance(BaseModel):
    diagnosis: str = ""
    bottleneck: str = "unknown"
    steps: list[str] = Field(default_factory=list)
    extra_metrics: list[str] = Field(default_factory=list)
    stop: bool = False
    sweep: bool = False  # ask the tuner (nodes/tune.py) to sweep the next verified candidate


def parse_guidance(text: str) -> ConductorGuidance | None:
    return structured.parse_json_reply(text, ConductorGuidance)[0]


def knowledge_section(profiles: list[dict[str, Any]], ctx: Context) -> str:
    """Compendium entries for the prompt; a failure here never costs the run its Conductor."""
    try:
        from pragma.knowledge.retrieval import context_for_profile

        return context_for_profile(profiles, ctx.backend, ctx.knowledge_max_chars)
    except Exception as exc:
        log.warning("profiler knowledge unavailable: %s", exc)
        return f"(profiler knowledge unavailable: {str(exc)[:200]})"


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {"usage": add_usage(a.get("usage"), b.get("usage")), "log": a.get("log", []) + b.get("log", [])}


def _tool_round(ctx: Context, system: str, human: str, attempt: int) -> tuple[Any, dict[str, Any]] | None:
    """Offer lookup_profiler_metric to a tool-capable model. Returns (reply, state update), or
    None when tools cannot be used (model without tool support, refused by the server, disabled)."""
    spec = chat.model_spec("conductor", ctx)
    if ctx.knowledge_tool_calls <= 0 or spec in _NO_TOOLS or spec.startswith("replay:"):
        return None
    from pragma.knowledge.tool import lookup_profiler_metric

    try:
        return chat.invoke_with_tools(
            "conductor",
            ctx,
            [SystemMessage(system), HumanMessage(human)],
            attempt,
            "conductor-tools",
            [lookup_profiler_metric],
        )
    except NotImplementedError:
        return None
    except Exception as exc:
        if llm.is_transient(exc):
            raise  # the node's retry policy handles timeouts and rate limits
        _NO_TOOLS.add(spec)
        log.warning("conductor model %s refused tool calling (%s); continuing without tools", spec, exc)
        return None


LOOKUP_TOOL = "lookup_profiler_metric"
# A step that only says to stop ("Stop and keep attempt 1 as the final kernel"): dropped from the
# Coder's guidance when the stop is overruled, which otherwise read "stop" then "keep optimizing".
STOP_STEP = re.compile(r"^\s*(stop\b|keep (attempt \d+|the (current|best)\b[^.]*|it) as (the )?final\b)", re.I)
# A step that only says what to resubmit if another candidate is forced ("Only if another candidate is
# mandated: keep attempt 1's tile exactly"): after an overruled stop the Coder took it as its step one
# and resubmitted the best (ablation transcripts, 2026-11-28, conv1d).
IF_FORCED_STEP = re.compile(
    r"^\s*(only\s+)?if\s+(another|a\s+further|one\s+more|a\s+new|more)\s+(candidate|attempt|kernel|submission)s?\b"
    r"[^:]*\b(mandated|required|forced|must|needed|demanded)",
    re.I,
)
# In place of the best's code and profile when the best is the current candidate.
SAME_AS_CURRENT = "(the current candidate is the best: its {what} is shown above)"
GUIDANCE_KEYS = frozenset(ConductorGuidance.model_fields)


def _lookup_calls(reply: Any) -> list[dict[str, Any]]:
    """The reply's real lookups: calls of the lookup tool that name something to look up."""
    return [
        c
        for c in (reply.tool_calls or [])
        if c.get("name") == LOOKUP_TOOL and str((c.get("args") or {}).get("query", "")).strip()
    ]


def _answer_of(reply: Any) -> tuple[ConductorGuidance | None, str, str]:
    """The guidance a tool-round reply already holds: (parsed or None, its text, the parse error).

    The answer is in the content, or, from a server that turns every reply into a call of the
    offered tool whenever tools are offered (relay_openai.py, some proxies), in a call's arguments:
    valid JSON (``tool_calls``) or not (``invalid_tool_calls``, e.g. a fenced block)."""
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    texts = [text] if text.strip() else []
    for call in reply.tool_calls or []:
        args = call.get("args") or {}
        if GUIDANCE_KEYS & set(args) and "query" not in args:
            texts.append(json.dumps(args))
    texts += [str(c.get("args") or "") for c in getattr(reply, "invalid_tool_calls", None) or []]
    error = "the reply holds no JSON guidance object"
    for candidate in texts:
        parsed, why = structured.parse_json_reply(candidate, ConductorGuidance)
        if parsed is not None:
            return parsed, candidate, ""
        error = why or error
    return None, (texts[0] if texts else ""), error


def _lookups(calls: list[dict[str, Any]], limit: int) -> str:
    from pragma.knowledge.tool import lookup_profiler_metric

    parts = []
    for call in calls[:limit]:
        args = call.get("args", {})
        try:
            answer = lookup_profiler_metric.invoke(args)
        except Exception as exc:  # a malformed call is answered, not fatal
            answer = f"lookup failed: {exc}"
        parts.append(f'<lookup query="{args.get("query", "")}">\n{answer}\n</lookup>')
    return "\n".join(parts)


def decide(
    ctx: Context, system: str, human: str, attempt: int, tools: bool = True
) -> tuple[ConductorGuidance | None, str, dict]:
    """One Conductor decision in as few model calls as the reply allows: the request offers the
    lookup tool; a reply that answers (in its text or a tool call's arguments) is the decision
    (one call); a reply that looks metrics up gets them and is asked once more (two calls); an
    unusable reply gets the one re-ask quoting why (two calls), never the same request again."""
    first = _tool_round(ctx, system, human, attempt) if tools else None
    if first is None:
        return structured.ask_structured("conductor", ctx, system, human, attempt, "conductor", ConductorGuidance)
    reply, update = first
    calls = _lookup_calls(reply)
    if not calls:
        parsed, text, error = _answer_of(reply)
        if parsed is not None:
            return parsed, text, update
        return structured.reask(
            "conductor", ctx, system, human, attempt, "conductor", ConductorGuidance, text, error, update
        )
    human = f"{human}\n<knowledge_lookups>\n{_lookups(calls, ctx.knowledge_tool_calls)}\n</knowledge_lookups>\n"
    parsed, text, more = structured.ask_structured(
        "conductor", ctx, system, human, attempt, "conductor", ConductorGuidance
    )
    return parsed, text, _merge(update, more)


def advice_mode(ctx: Context) -> str:
    if ctx.optimize_advice != "auto":
        return ctx.optimize_advice
    return "rules" if llm.is_local(chat.model_spec("conductor", ctx), "conductor") else "model"


def _overruled_text(parsed: Any, to_coder: str, text: str, why: str, ctx: Context) -> str:
    """The Coder's guidance after an overruled stop: the diagnosis, one substantially different
    approach to try first, then the real steps, without the steps that only say to stop or what to
    resubmit if forced (ablation transcripts: "1. Stop and keep attempt 1 as the final kernel" then
    "The stop was overruled: keep optimizing" gave wrapper-only edits)."""
    try_next = (
        f"The Conductor saw little left to gain, but the stop was overruled ({why}). Try one substantially "
        f"different approach (algorithm, data layout, blocking, fusion of passes) that could beat the best "
        f"by more than {acceptance.bar(ctx.acceptance_margin):.2f}x, keeping what makes the best correct."
    )
    if parsed is None:
        return f"{text}\n{try_next}"
    # The new approach first, the Conductor's other steps after it as material: a Coder reading
    # "1. keep attempt 1's tile exactly" before it resubmitted the best.
    steps = [try_next] + [s for s in parsed.steps if not STOP_STEP.match(s) and not IF_FORCED_STEP.match(s)]
    lead = f"{to_coder}\n" if to_coder else ""
    return lead + _guidance_text(parsed.diagnosis, steps)


def _guidance_text(diagnosis: str, steps: list[str]) -> str:
    """What the Coder reads of a parsed decision: the diagnosis and the numbered steps."""
    numbered = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(steps))
    return f"Diagnosis: {diagnosis}\nNext steps:\n{numbered}"


def conductor(state: PragmaState, runtime: Runtime[Context]) -> dict:
    candidate, result, best = state["candidate"], state["verification"], state.get("best") or {}
    profile = state.get("profile") or {}
    # N-PRAGMA: the same Conductor, shown only correctness and time (str.format ignores extra keys),
    # and no profiler knowledge or lookup tool either.
    no_profile = runtime.context.agent_mode == "no-profile"
    # The verifier's head-to-head verdict, not the profile's timings, says whether it was faster; a
    # Coder shown the older best after a faster-looking kernel is told why (issue 34).
    to_coder = verdict.for_coder(result, best, candidate["iteration"])
    if advice_mode(runtime.context) == "rules":
        code = candidate.get("kernel") or candidate.get("code") or ""
        guidance = playbook.guidance_from_profile(
            profile,
            best,
            float(result["speedup"]),
            runtime.context.backend,
            no_profile,
            code,
            runtime.context.num_threads,
        )
        if to_coder:
            guidance = {**guidance, "text": f"{to_coder}\n{guidance['text']}"}
        return {
            "log": [recording.rules_entry("conductor", candidate["iteration"], guidance["text"])],
            "guidance": guidance,
        }
    template = prompts.CONDUCTOR_HUMAN_NO_PROFILE if no_profile else prompts.CONDUCTOR_HUMAN
    knowledge = "" if no_profile else knowledge_section([profile, best.get("profile") or {}], runtime.context)
    # The candidate that just became the best is shown once: printing it again as the best (with its
    # profile) doubled the prompt (ablation transcripts: ~10-37K characters repeated at attempt 1).
    same = int(best.get("iteration") or 0) == int(candidate["iteration"]) and best.get("code") == candidate["code"]
    human = template.format(
        runtime_ms=result["runtime_ms"],
        ref_runtime_ms=result["ref_runtime_ms"],
        attempt=candidate["iteration"],
        name=state["problem"]["name"],
        source=state["problem"]["source"],
        hardware=state.get("hardware", ""),
        history=verdict.history(state.get("attempts", []), state.get("sweeps", [])),
        iteration=candidate["iteration"],
        speedup=result["speedup"],
        code=candidate["code"],
        profile=render_profile(profile),
        best_iteration=best.get("iteration", 0),
        best_speedup=best.get("speedup", 0.0),
        best_code=SAME_AS_CURRENT.format(what="code") if same else best.get("code", ""),
        best_profile=SAME_AS_CURRENT.format(what="profile") if same else render_profile(best.get("profile") or {}),
        diff=profile.get("diff_vs_best", ""),
        knowledge=knowledge,
        verdict=verdict.render(result, best, candidate["iteration"], profiled=not no_profile),
    )
    system_template = prompts.CONDUCTOR_SYSTEM_NO_PROFILE if no_profile else prompts.CONDUCTOR_SYSTEM
    system = system_template.format(
        vocabulary=", ".join(VOCABULARY), acceptance_bar=acceptance.bar(runtime.context.acceptance_margin)
    )
    parsed, text, update = decide(runtime.context, system, human, candidate["iteration"], tools=not no_profile)
    if parsed is None:
        # Free text is still useful guidance; it just carries no stop flag or metric requests.
        guidance = {
            "mode": "optimize",
            "text": strip_reasoning(text),
            "bottleneck": "unknown",
            "extra_metrics": [],
            "should_stop": False,
        }
    else:
        guidance = {
            "mode": "optimize",
            "text": _guidance_text(parsed.diagnosis, parsed.steps),
            "bottleneck": parsed.bottleneck,
            "extra_metrics": parsed.extra_metrics,
            "should_stop": parsed.stop,
            "sweep": parsed.sweep,
        }
    if to_coder:
        guidance["text"] = f"{to_coder}\n{guidance['text']}"
    if guidance["should_stop"]:
        # The router decides (graph/routing.py reads the limits); the node records its verdict so
        # the state, the Coder and the report say why the run went on.
        honoured, why = stop_verdict({**state, "guidance": guidance}, runtime.context)
        if not honoured:
            guidance["stop_overruled"] = why
            guidance["text"] = _overruled_text(parsed, to_coder, guidance["text"], why, runtime.context)
            update = {**update, "stop_overrules": [{"attempt": candidate["iteration"], "reason": why}]}
    return {**update, "guidance": guidance}
