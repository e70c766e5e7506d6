"""conductor (LLM): compare the candidate's profile with the best's and plan the next step."""

from __future__ import annotations

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.nodes import prompts, structured
from pragma.tools.extract import strip_reasoning
from pragma.tools.profilers.bottleneck import VOCABULARY
from pragma.tools.profilers.cpu import render_profile


class ConductorGuidance(BaseModel):
    diagnosis: str = ""
    bottleneck: str = "unknown"
    steps: list[str] = Field(default_factory=list)
    extra_metrics: list[str] = Field(default_factory=list)
    stop: bool = False


def parse_guidance(text: str) -> ConductorGuidance | None:
    return structured.parse_json_reply(text, ConductorGuidance)[0]


def _history(attempts: list[dict]) -> str:
    return "\n".join(f"attempt {a['iteration']}: {a['status']}, speedup {a['speedup']:.3f}x" for a in attempts)


def conductor(state: PragmaState, runtime: Runtime[Context]) -> dict:
    candidate, result, best = state["candidate"], state["verification"], state.get("best") or {}
    profile = state.get("profile") or {}
    # N-PRAGMA: the same Conductor, shown only correctness and time (str.format ignores extra keys).
    no_profile = runtime.context.agent_mode == "no-profile"
    template = prompts.CONDUCTOR_HUMAN_NO_PROFILE if no_profile else prompts.CONDUCTOR_HUMAN
    human = template.format(runtime_ms=result["runtime_ms"], ref_runtime_ms=result["ref_runtime_ms"],
        attempt=candidate["iteration"], name=state["problem"]["name"], source=state["problem"]["source"],
        hardware=state.get("hardware", ""), history=_history(state.get("attempts", [])),
        iteration=candidate["iteration"], speedup=result["speedup"], code=candidate["code"],
        profile=render_profile(profile), best_iteration=best.get("iteration", 0),
        best_speedup=best.get("speedup", 0.0), best_code=best.get("code", ""),
        best_profile=render_profile(best.get("profile") or {}), diff=profile.get("diff_vs_best", ""),
    )
    system_template = prompts.CONDUCTOR_SYSTEM_NO_PROFILE if no_profile else prompts.CONDUCTOR_SYSTEM
    system = system_template.format(vocabulary=", ".join(VOCABULARY))
    parsed, text, update = structured.ask_structured("conductor", runtime.context, system, human,
                                                     candidate["iteration"], "conductor", ConductorGuidance)
    if parsed is None:
        # Free text is still useful guidance; it just carries no stop flag or metric requests.
        guidance = {"mode": "optimize", "text": strip_reasoning(text), "bottleneck": "unknown",
                    "extra_metrics": [], "should_stop": False}
    else:
        steps = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(parsed.steps))
        guidance = {"mode": "optimize", "text": f"Diagnosis: {parsed.diagnosis}\nNext steps:\n{steps}",
                    "bottleneck": parsed.bottleneck, "extra_metrics": parsed.extra_metrics,
                    "should_stop": parsed.stop}
    return {**update, "guidance": guidance}
