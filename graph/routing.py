"""Routers: the only place loop limits are read. Literal returns let Studio label the edges."""

from __future__ import annotations

import time
from typing import Literal

from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Send

from pragma.graph.context import Context
from pragma.graph.state import PragmaState


def stop_reason(state: PragmaState, ctx: Context) -> str | None:
    """Why the loop must end now, or None. Shared by the routers and the run report."""
    if candidates_written(state) >= ctx.max_iterations:
        return f"reached max_iterations={ctx.max_iterations}"
    if state.get("consecutive_failures", 0) > ctx.max_repairs:
        return f"more than max_repairs={ctx.max_repairs} consecutive failed candidates"
    if state.get("guidance", {}).get("should_stop"):
        honoured, why = stop_verdict(state, ctx)
        if honoured:
            return f"the Conductor judged further gains unlikely ({why})"
    return budget_exhausted(state, ctx)


# A stop needs the best kernel at its roof: memory-side kernels at this share of the bandwidth of
# the level their working set lives in (tools/profilers/roofline.py), compute-side ones at this
# share of peak FLOP/s. 80% is where the seed's roofline_pct entry says further gains get hard;
# the measured peaks are best-of-N figures that real kernels rarely exceed by much.
STOP_ROOF_PCT = 80.0
# A best kernel measured this far above its roof is not evidence of being at a limit: the roof
# does not bound it (part of its data comes from a faster level than the one its working set
# names, or the calibrated peak is low). The embedded demo's ReLU read "158% of the DRAM roof"
# (65.5 MB working set; the input partly still in the 32 MiB L3 between profiled calls) while a
# kernel with streaming stores runs 1.35x faster than it; a stop there would have been honoured.
ABOVE_ROOF_PCT = 115.0


def stop_verdict(state: PragmaState, ctx: Context) -> tuple[bool, str]:
    """Whether the Conductor's stop is honoured now, and the evidence for or against it.

    Honoured only after ``min_iterations`` candidates, and only when the best kernel's profile
    puts it near the right roof (or there is no roofline to check: no-profile mode, a failed
    profile). Otherwise the run goes on; the conductor node records why (stop_overruled).
    """
    done = candidates_written(state)
    if done < ctx.min_iterations:
        return False, f"only {done} of min_iterations={ctx.min_iterations} candidates written"
    best = state.get("best") or {}
    roof = (best.get("profile") or state.get("profile") or {}).get("roofline") or {}
    if roof.get("status") != "ok":
        return True, f"{done} candidates written; no roofline to check the stop against"
    if roof.get("bound_by") == "memory":
        pct = float(roof.get("bandwidth_pct", roof.get("roofline_pct", 0.0)))
        where = (
            f"{roof['roof_why']}, roof {roof['roof_gbs']:.3g} GB/s"
            if "roof_level" in roof
            else f"bandwidth roof {roof.get('peak_gbs', 0.0):.3g} GB/s"
        )
        at = f"the best kernel reaches {pct:.0f}% of its memory roof ({where})"
    else:
        pct = float(roof.get("roofline_pct", 0.0))
        at = f"the best kernel reaches {pct:.0f}% of its compute roof ({roof.get('peak_gflops', 0.0):.3g} GFLOP/s)"
    if pct > ABOVE_ROOF_PCT:
        return False, f"{at}: above its roof, so the roof does not bound it and is no evidence of a limit"
    if pct >= STOP_ROOF_PCT:
        return True, at
    return False, f"{at}, below the {STOP_ROOF_PCT:.0f}% a stop needs"


def budget_exhausted(state: PragmaState, ctx: Context) -> str | None:
    """Token, cost, LLM-call and wall-time budgets (0 disables each); the best so far is kept."""
    usage = state.get("usage") or {}
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    if ctx.max_tokens_total and tokens >= ctx.max_tokens_total:
        return f"token budget spent ({tokens:.0f} >= max_tokens_total={ctx.max_tokens_total})"
    if ctx.max_cost_usd and usage.get("cost_usd", 0.0) >= ctx.max_cost_usd:
        return f"cost budget spent (${usage['cost_usd']:.4f} >= max_cost_usd={ctx.max_cost_usd})"
    calls = int(usage.get("llm_calls", 0))
    if ctx.max_llm_calls and calls >= ctx.max_llm_calls:
        return f"LLM-call budget spent ({calls} >= max_llm_calls={ctx.max_llm_calls})"
    started = state.get("started_at")
    if ctx.max_wall_s and started and time.time() - started >= ctx.max_wall_s:
        return f"wall-time budget spent ({time.time() - started:.0f} s >= max_wall_s={ctx.max_wall_s:.0f})"
    return None


def candidates_written(state: PragmaState) -> int:
    """Candidates the Coder wrote: ``iteration`` less the tuner's children, which take an
    iteration number (the lineage's key) but no LLM call, so max_iterations and min_iterations
    count the same candidates with the tuner on or off."""
    tuned = sum(1 for a in state.get("attempts", []) if a.get("origin") == "tune")
    return int(state.get("iteration", 0)) - tuned


def sweep_wanted(state: PragmaState, ctx: Context) -> bool:
    """Whether the tuner sweeps the candidate just verified: tune_budget_s > 0, the candidate not
    swept before (by its code), and it declares tunables or the Conductor asked for a sweep (then
    the build knobs alone are swept)."""
    if ctx.tune_budget_s <= 0:
        return False
    candidate = state.get("candidate") or {}
    code = candidate.get("code", "")
    if not code or candidate.get("origin") == "tune":
        return False
    from pragma.nodes.tune import code_sha
    from pragma.tools import tunables

    sha = code_sha(code)
    if any(r.get("base_sha") == sha for r in state.get("sweeps", [])):
        return False
    if tunables.parse(code):
        return True
    from pragma.nodes.tune import rewrite_dims

    if rewrite_dims(code, ctx):
        return True  # a rewrite to try (streaming stores), whatever the guidance
    asked = bool((state.get("guidance") or {}).get("sweep"))
    return asked and ctx.backend == "cpu" and bool(tunables.build_knobs(code, has_avx512=False))


def route_after_verifier(
    state: PragmaState, runtime: Runtime[Context]
) -> Literal["repair", "profiler", "tune", "coder", "__end__"]:
    if state.get("verification", {}).get("status") == "ok":
        return "tune" if sweep_wanted(state, runtime.context) else "profiler"
    if stop_reason(state, runtime.context) is not None:
        return END
    # Single-agent mode has no Conductor: the Coder reads the verifier's feedback itself.
    return "coder" if runtime.context.agent_mode == "single-agent" else "repair"


def route_after_tune(state: PragmaState, runtime: Runtime[Context]) -> Literal["tune", "profiler"]:
    """One variant per step until the sweep is done, then the profiler (it profiles and crowns
    the tuned child when the gate accepted it, else the candidate as verified)."""
    return "profiler" if (state.get("sweep") or {}).get("done") else "tune"


def route_after_conductor(state: PragmaState, runtime: Runtime[Context]) -> Literal["coder", "__end__"]:
    if stop_reason(state, runtime.context) is not None:
        return END
    return "coder"


def route_after_profiler(state: PragmaState, runtime: Runtime[Context]) -> Literal["conductor", "coder", "__end__"]:
    # No Conductor call when no further candidate can be written: it would cost tokens for nothing.
    if candidates_written(state) >= runtime.context.max_iterations:
        return END
    if budget_exhausted(state, runtime.context):
        return END
    return "coder" if runtime.context.agent_mode == "single-agent" else "conductor"


def route_after_repair(state: PragmaState, runtime: Runtime[Context]) -> Literal["coder", "__end__"]:
    # The repair call may have spent the last of an LLM budget (max_llm_calls, tokens, cost).
    return END if budget_exhausted(state, runtime.context) else "coder"


def per_round(ctx: Context) -> int:
    """Candidates per round: the knob, or 1 for greedy and 2 for beam and tree when it is 0."""
    if ctx.candidates_per_round > 0:
        return ctx.candidates_per_round
    return 1 if ctx.search == "greedy" else 2


def route_after_setup(state: PragmaState, runtime: Runtime[Context]) -> Literal["coder", "plan"]:
    # The paper's loop keeps its own topology; any other search runs in rounds (nodes/search.py).
    ctx = runtime.context
    return "coder" if ctx.search == "greedy" and per_round(ctx) == 1 else "plan"


def route_after_plan(state: PragmaState, runtime: Runtime[Context]) -> list[Send] | Literal["__end__"]:
    """Fan the round's expansions out to the Coder (one Send each), or end the run."""
    planned = state.get("plan") or []
    if not planned or stop_reason(state, runtime.context) is not None:
        return END
    from pragma.nodes.search import expansion_payload

    return [Send("expand", expansion_payload(state, item)) for item in planned]


def route_after_verify_next(
    state: PragmaState, runtime: Runtime[Context]
) -> list[Send] | Literal["verify_next", "plan"]:
    """One candidate per step until the round is verified, then its reviews in parallel."""
    from pragma.nodes.search import pending_drafts, review_payloads

    if pending_drafts(state):
        return "verify_next"
    sends = [Send("review", payload) for payload in review_payloads(state, runtime.context)]
    return sends or "plan"
