"""repair (the Conductor in repair mode, LLM): turn verifier logs into concrete fix instructions."""

from __future__ import annotations

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.nodes import chat, prompts
from pragma.tools.extract import strip_reasoning


def repair(state: PragmaState, runtime: Runtime[Context]) -> dict:
    result = state["verification"]
    attempt = state["candidate"]["iteration"]
    human = prompts.REPAIR_HUMAN.format(
        attempt=attempt, name=state["problem"]["name"], source=state["problem"]["source"],
        code=prompts.failed_code(state["candidate"]), status=result["status"], max_abs_diff=result.get("max_abs_diff", 0.0),
        message=result["message"], log_tail=result.get("log_tail", "")[-3000:],
    )
    text, update = chat.ask("conductor", runtime.context, prompts.REPAIR_SYSTEM, human, attempt, node="repair")
    return {**update, "guidance": {"mode": "repair", "text": strip_reasoning(text), "should_stop": False}}
