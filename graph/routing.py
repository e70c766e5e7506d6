"""Routers: the only place loop limits are read. Literal returns let Studio label the edges."""

from __future__ import annotations

import time
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
    return budget_exhausted(state, ctx)


def budget_exhausted(state: PragmaState, ctx: Context) -> str | None:
    """Token, cost and wall-time budgets (0 disables each); the best so far is kept."""
    usage = state.get("usage") or {}
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    if ctx.max_tokens_total and tokens >= ctx.max_tokens_total:
        return f"token budget spent ({tokens:.0f} >= max_tokens_total={ctx.max_tokens_total})"
    if ctx.max_cost_usd and usage.get("cost_usd", 0.0) >= ctx.max_cost_usd:
        return f"cost budget spent (${usage['cost_usd']:.4f} >= max_cost_usd={ctx.max_cost_usd})"
    started = state.get("started_at")
    if ctx.max_wall_s and started and time.time() - started >= ctx.max_wall_s:
        return f"wall-time budget spent ({time.time() - started:.0f} s >= max_wall_s={ctx.max_wall_s:.0f})"
    return None


def route_after_verifier(
    state: PragmaState, runtime: Runtime[Context]
) -> Literal["repair", "profiler", "coder", "__end__"]:
    if state.get("verification", {}).get("status") == "ok":
        return "profiler"
    if stop_reason(state, runtime.context) is not None:
        return END
    # Single-agent mode has no Conductor: the Coder reads the verifier's feedback itself.
    return "coder" if runtime.context.agent_mode == "single-agent" else "repair"


def route_after_conductor(
    state: PragmaState, runtime: Runtime[Context]
) -> Literal["coder", "__end__"]:
    if stop_reason(state, runtime.context) is not None:
        return END
    return "coder"


def route_after_profiler(
    state: PragmaState, runtime: Runtime[Context]
) -> Literal["conductor", "coder", "__end__"]:
    # No Conductor call when no further candidate can be written: it would cost tokens for nothing.
    if state.get("iteration", 0) >= runtime.context.max_iterations:
        return END
    if budget_exhausted(state, runtime.context):
        return END
    return "coder" if runtime.context.agent_mode == "single-agent" else "conductor"
