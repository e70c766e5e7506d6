"""repair (the Conductor in repair mode): turn verifier logs into concrete fix instructions.

The instructions always start with PRAGMA's fixed hints for the failure (``nodes/hints.py``: what
the verifier found, where, what to do instead). ``Context.repair_advice`` decides whether the
Conductor model adds its own advice: with the embedded model the hints stand alone by default,
because a 1.5B model's advice was seen to contradict them.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.nodes import budget, chat, hints, llm, prompts, recording
from pragma.tools.extract import strip_reasoning


def advice_mode(ctx: Context) -> str:
    if ctx.repair_advice != "auto":
        return ctx.repair_advice
    return "rules" if llm.is_local(chat.model_spec("conductor", ctx), "conductor") else "rules+model"


def repair(state: PragmaState, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    result = state["verification"]
    candidate = state["candidate"]
    attempt = candidate["iteration"]
    fixed = hints.candidate_hints(result, candidate)
    if advice_mode(ctx) == "rules":
        return {
            "log": [recording.rules_entry("repair", attempt, fixed)],
            "guidance": {"mode": "repair", "text": fixed, "should_stop": False},
        }
    human = prompts.REPAIR_HUMAN.format(
        attempt=attempt,
        name=state["problem"]["name"],
        source=state["problem"]["source"],
        code=prompts.failed_code(candidate),
        status=result["status"],
        max_abs_diff=result.get("max_abs_diff", 0.0),
        message=result["message"],
        log_tail=result.get("log_tail", "")[-3000:],
    )
    if fixed:
        human += prompts.RULE_HINTS_SECTION.format(hints=fixed)
    spec = chat.model_spec("conductor", ctx)
    human = budget.fit(
        prompts.REPAIR_SYSTEM, human, budget.budget_for(ctx.prompt_budget_tokens, llm.is_local(spec, "conductor"))
    )
    text, update = chat.ask("conductor", ctx, prompts.REPAIR_SYSTEM, human, attempt, node="repair")
    advice = strip_reasoning(text)
    guidance = prompts.REPAIR_GUIDANCE.format(hints=fixed, advice=advice) if fixed else advice
    return {**update, "guidance": {"mode": "repair", "text": guidance, "should_stop": False}}
