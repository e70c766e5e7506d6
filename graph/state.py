"""Graph state: JSON-native TypedDicts only, so every checkpoint is plain data.

Invariants:
- ``attempts`` is append-only (one entry per verified candidate, in iteration order).
- ``best`` only ever moves to a candidate the verifier accepted as a new best: correct, re-checked
  on held-out inputs, plausible, and with the 95% CI of its speedup over the current best above
  1 + ``acceptance_margin`` (the rule: tools/judging/acceptance.py; the reducer: ``keep_best``).
- ``usage`` accumulates token counts over every LLM call of the run.
- ``attempts`` is also the lineage: each names its ``parent`` (the node it was refined or repaired
  from, 0 for a fresh start) and carries its diff against it (graph/lineage.py draws the tree).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from pragma.tools.judging import acceptance
from pragma.tools.wire.verification import VerifyResult


class Problem(TypedDict, total=False):
    path: str  # absolute path of the KernelBench-format problem file
    name: str
    source: str
    inputs: list[dict[str, Any]]  # [{shape, dtype}] of get_inputs()
    init_inputs: list[Any]
    outputs: dict[str, Any]  # {container, items: [{kind, shape, dtype}]} of forward's result (probe)
    outputs_alt: dict[str, Any]  # the same for a second input draw (data-dependent shapes differ)
    state_names: list[str]  # the reference's parameters and buffers (kernel format needs none)


class Candidate(TypedDict, total=False):
    iteration: int  # 1-based: the n-th candidate the Coder wrote
    code: str
    origin: str  # "initial" | "repair" | "refine"
    unusable_reply: str  # set when the reply held no usable module: its start, shown in repair prompts
    format: str  # "module" | "kernel" (candidate_format actually used for this candidate)
    kernel: str  # kernel format: the C++ the model wrote (``code`` is PRAGMA's module around it)
    format_note: str  # why kernel format fell back to module for this problem, if it did
    given_call: str  # kernel format, one element-wise operator: the fast form its given body calls (silu_fn)
    parent: int  # the lineage node it was written from (refined or repaired); 0: a fresh start
    branch: int  # search=beam: the lineage it belongs to (0 in the greedy loop)
    round: int  # the search round that wrote it (0 in the greedy loop)
    guidance: str  # the start of the guidance that produced it (the report's lineage tree)


class Best(TypedDict, total=False):
    iteration: int
    code: str
    speedup: float
    runtime_ms: float
    ref_runtime_ms: float
    profile: dict[str, Any]
    speedup_ci: list[float]  # 95% bootstrap CI of the speedup over the reference
    is_new_best: bool  # the verifier's acceptance decision (head-to-head against the previous best)


class Guidance(TypedDict, total=False):
    mode: str  # "repair" | "optimize"
    text: str  # what the Coder reads
    bottleneck: str
    extra_metrics: list[str]
    should_stop: bool
    stop_overruled: str  # the Conductor asked to stop and routing.stop_verdict refused: why
    sweep: bool  # the Conductor asks the tuner (nodes/tune.py) to sweep the next verified candidate


def keep_best(current: Best | None, update: Best | None) -> Best:
    """Reducer for the historical best (the rule: tools/judging/acceptance.py, rule 5).

    An update for the same iteration merges into it (the profiler attaches the profile later).
    An update carrying the verifier's decision (``is_new_best``) is obeyed: the verifier timed the
    candidate against the current best in the same session and accepts only when the lower end of
    the 95% CI of its speedup over it exceeds 1 + ``acceptance_margin`` (in a second pair of runners
    too, when it timed one), so its speedup over the reference may even read lower than the best's
    older measurement. Without a decision (older results), only a strictly faster update wins.
    """
    current = current or Best()
    if not update:
        return current
    if current and update.get("iteration") == current.get("iteration"):
        return Best(**{**current, **update})
    return Best(**update) if acceptance.replaces(current, update) else current


def add_usage(current: dict[str, float] | None, update: dict[str, float] | None) -> dict[str, float]:
    """Reducer summing token/call counters key by key."""
    merged = dict(current or {})
    for key, value in (update or {}).items():
        merged[key] = merged.get(key, 0) + value
    return merged


class PragmaState(TypedDict, total=False):
    problem: Problem
    hardware: str  # short machine summary for prompts
    started_at: float  # epoch seconds when the run started (for max_wall_s)
    iteration: int  # number of candidates written so far
    candidate: Candidate
    verification: VerifyResult  # the latest verifier result (total: tools/wire/verification.py)
    consecutive_failures: int
    profile: dict[str, Any]  # profile of the latest verified candidate
    guidance: Guidance
    best: Annotated[Best, keep_best]
    attempts: Annotated[list[dict[str, Any]], operator.add]
    usage: Annotated[dict[str, float], add_usage]
    log: Annotated[list[dict[str, Any]], operator.add]  # LLM exchanges (role, iteration, text)
    # Conductor stops routing.stop_verdict refused: {attempt, reason}, one per overruled stop.
    stop_overrules: Annotated[list[dict[str, Any]], operator.add]
    # The tuner (nodes/tune.py): the sweep in progress (replaced every step, so a killed run resumes
    # at its next variant) and one record per finished sweep (the report's sweep table).
    sweep: dict[str, Any]
    sweeps: Annotated[list[dict[str, Any]], operator.add]
    # Search in rounds (nodes/search.py); the greedy loop leaves these empty.
    round: int  # the current round
    plan: list[dict[str, Any]]  # the round's expansions: {mode, parent, branch, iteration, round, variant, of}
    drafts: Annotated[list[Candidate], operator.add]  # every candidate written in a round, in the order written
    reviews: Annotated[
        list[dict[str, Any]], operator.add
    ]  # per verified candidate: {iteration, guidance, bottleneck, ...}
    # Keys of one Send payload only (never in the run's state): the expansion a Coder call serves,
    # and the note that makes parallel variants of one parent differ.
    expansion: dict[str, Any]
    variant: str
    final: bool  # a review that only profiles (the run ends after this round)


class InputState(TypedDict, total=False):
    """What a caller (CLI, eval, Studio) provides: a problem path, or its source."""

    problem: Problem
