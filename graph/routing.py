"""Routers: the only place loop limits are read. Literal returns let Studio label the edges."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END
from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState


def stop_reason(state: PragmaState, ctx: Context) -> str | None:
    """Why the loop must end now, or None. Shared by the routers and the run report."""
    if state.get("iteration", 0) >= ctx.max_iterations:
        return f"reached max_iterations={ctx.max_iterations}"
    if state.get("consecutive_failures", 0) > ctx.max_repairs:
        return f"more than max_repairs={ctx.max_repairs} consecutive failed candidates"
    if state.get("guidance", {}).get("should_stop"):
        return "the Conductor judged further gains unlikely"
    return None


def route_after_verifier(
    state: PragmaState, runtime: Runtime[Context]
) -> Literal["repair", "profiler", "__end__"]:
    if state.get("verification", {}).get("status") == "ok":
        return "profiler"
    if stop_reason(state, runtime.context) is not None:
        return END
    return "repair"


def route_after_conductor(
    state: PragmaState, runtime: Runtime[Context]
) -> Literal["coder", "__end__"]:
    if stop_reason(state, runtime.context) is not None:
        return END
    return "coder"


def route_after_profiler(
    state: PragmaState, runtime: Runtime[Context]
) -> Literal["conductor", "__end__"]:
    # No Conductor call when no further candidate can be written: it would cost tokens for nothing.
    if state.get("iteration", 0) >= runtime.context.max_iterations:
        return END
    return "conductor"
