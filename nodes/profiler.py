"""profiler (no LLM): profile the verified candidate, diff it against the historical best, and
crown it as the new best when the verifier accepted it (so the best always carries its profile)."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.nodes import verdict
from pragma.tools.backends import backend_for
from pragma.tools.judging.acceptance import best_update
from pragma.tools.profilers import diff

log = logging.getLogger("pragma.profiler")


def _remember(state: PragmaState, ctx: Context, candidate: dict, result: dict, profile: dict) -> None:
    """Add an accepted best to the memory of verified kernels (knowledge/kernels.py), unless
    ``kernel_memory`` is off or not ``kernel_memory_shared``. A failure is logged: the memory never
    stops a run."""
    if not ctx.kernel_memory or not ctx.kernel_memory_shared:
        return
    try:
        from pragma.knowledge import kernels

        problem = state["problem"]
        kernels.add(
            source=problem.get("source", ""),
            name=problem.get("name", ""),
            code=candidate.get("kernel") or candidate["code"],
            fmt=candidate.get("format", "module"),
            speedup=float(result.get("speedup", 0.0)),
            profile_summary=f"bottleneck {profile.get('bottleneck', 'unknown')} "
            f"(confidence {profile.get('confidence', 'none')})",
        )
    except Exception as exc:
        log.warning("kernel memory not updated: %s", " ".join(str(exc).split())[:200])


SKIPPED_REASON = "agent_mode={mode}: not profiled"


def profile_candidate(state: PragmaState, ctx: Context, candidate: dict) -> tuple[dict, str]:
    """(profile, hardware summary) of a verified candidate: the backend's profile with its diff
    against the historical best, or a 'skipped' profile in the modes that measure nothing beyond
    the verifier. Shared by this node and the search's review (nodes/search.py)."""
    if ctx.agent_mode != "pragma":
        # N-PRAGMA and single-agent measure nothing beyond the verifier: crown the best on time alone.
        skipped = {
            "status": "skipped",
            "reason": SKIPPED_REASON.format(mode=ctx.agent_mode),
            "sources": [],
            "confidence": "none",
            "metrics": {},
            "bottleneck": "unknown",
            "iteration": candidate["iteration"],
        }
        return skipped, state.get("hardware", "")
    # Metrics the Conductor asked for last time are collected now (validated in profilers/extra.py).
    extra = (state.get("guidance") or {}).get("extra_metrics") or []
    backend = backend_for(ctx)  # cpu: perf/callgrind/static; gpu: Nsight Compute
    profile = backend.profile(state["problem"]["path"], candidate["code"], ctx, extra)
    best = state.get("best") or {}
    # The best itself (a search round's review profiles the freshly crowned best) diffs against nothing.
    previous = best.get("profile") if best.get("iteration") != candidate["iteration"] else None
    delta = diff.diff_profiles(previous, profile)
    profile = {
        **profile,
        "diff": delta,
        "diff_vs_best": diff.render_diff(delta, best.get("iteration")),
        "iteration": candidate["iteration"],
    }
    # Where the verifier's calls sit between this profile's warm and cold ones (nodes/verdict.py).
    if (result := state.get("verification") or {}) and (where := verdict.regime(result, profile)):
        profile["judged_regime"] = where
    # The first profile measures the machine's peaks; from then on the prompts' summary shows them.
    return profile, backend.hardware_summary(ctx)


def profiler(state: PragmaState, runtime: Runtime[Context]) -> dict:
    candidate, result = state["candidate"], state["verification"]
    profile, hardware = profile_candidate(state, runtime.context, candidate)
    update: dict = {"profile": profile}
    if hardware != state.get("hardware", ""):
        update["hardware"] = hardware
    if crowned := best_update(candidate, result, profile):
        update["best"] = crowned
        _remember(state, runtime.context, candidate, result, profile)
    return update
