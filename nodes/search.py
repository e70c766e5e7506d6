"""Search in rounds (``Context.search`` beam | tree, or ``candidates_per_round`` > 1): several
candidates per round, written in parallel, over a lineage tree.

    setup -> plan --Send x N--> expand (Coder) --join--> verify_next (one per step) --Send x M--> review -> plan
                 \\--stop--> END                           ^---- more to verify ----/            (profile +
                                                                                               Conductor/repair)

- ``plan`` (no LLM) picks the round's N expansions with the policy (``POLICIES``): a parent in the
  lineage tree (or none: a fresh start), what to do with it (refine a correct one, repair a failed
  one) and the guidance its review produced.
- ``expand`` is the Coder, called once per expansion in parallel through LangGraph ``Send``; a
  kernel-format candidate's C++ is compiled there too (in the sandbox, into the build cache), so
  the round compiles in parallel; the candidates join in state through the ``drafts`` reducer.
- ``verify_next`` verifies the round's candidates one after another (the machine's timing slot;
  each against the historical best as it stands, so two good candidates in one round cannot both
  be crowned on the same evidence), one candidate per graph step, so a run killed mid-round and
  resumed re-verifies none of the finished ones; LangGraph's checkpointed pending writes do the
  same for the finished Coder and review calls of a round.
- ``review`` profiles a verified candidate and asks the Conductor (or repair, for a failed one)
  what its children should do, one per candidate in parallel.

The historical best is always the verifier's accepted best (``keep_best``), whatever the policy.
"""

from __future__ import annotations

import math
import time
from typing import Any

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.routing import budget_exhausted, per_round
from pragma.graph.state import PragmaState
from pragma.nodes import hints
from pragma.nodes.coder import coder
from pragma.nodes.conductor import conductor
from pragma.nodes.profiler import _remember, profile_candidate
from pragma.nodes.repair import repair
from pragma.nodes.verifier import verifier
from pragma.tools import glue
from pragma.tools.judging import acceptance
from pragma.tools.verify import prebuild_kernel

# Failure details a review's repair needs (the verifier's attempt record leaves them out: large).
FAILURE_TAIL_CHARS = 3000
# A fresh start (no parent) is worth this share of the best's speedup in the tree policy: high
# enough to try one when every lineage stalls, low enough not to abandon a good one early.
FRESH_START_VALUE = 0.25
# Prior from the Conductor's diagnosis of a node (tree policy): a named bottleneck is a lead worth
# following; a stop says the node is at its roof.
PRIOR_LEAD = 0.1
PRIOR_STOP = -0.25
VARIANT_TEXT = (
    "This is variant {v} of {of} written in parallel from the same starting point: take a different "
    "approach from the obvious one (another loop order, blocking, vectorization or algorithm), so that "
    "the variants explore different ideas."
)


# ---------------------------------------------------------------- the lineage as the policies see it


def _by_iteration(state: PragmaState) -> dict[int, dict[str, Any]]:
    return {int(a["iteration"]): a for a in state.get("attempts", [])}


def _reviews(state: PragmaState) -> dict[int, dict[str, Any]]:
    return {int(r["iteration"]): r for r in state.get("reviews", [])}


def _children(state: PragmaState) -> dict[int, int]:
    """Expansions per node (0: the root, fresh starts), written or planned."""
    counts: dict[int, int] = {}
    for d in state.get("drafts", []):
        counts[int(d.get("parent") or 0)] = counts.get(int(d.get("parent") or 0), 0) + 1
    return counts


def failure_chain(attempts: dict[int, dict[str, Any]], iteration: int) -> int:
    """Failed candidates in a row ending at ``iteration``, following parents (a repair chain)."""
    n, node = 0, attempts.get(iteration)
    while node is not None and node["status"] != "ok":
        n += 1
        node = attempts.get(int(node.get("parent") or 0))
    return n


def _item(mode: str, parent: int, branch: int) -> dict[str, Any]:
    return {"mode": mode, "parent": parent, "branch": branch}


def _fresh_or_repair(state: PragmaState, ctx: Context, nodes: list[dict[str, Any]], branch: int) -> dict[str, Any]:
    """For a lineage without a correct node: repair its latest failure while repairs remain, else start afresh."""
    attempts = _by_iteration(state)
    if nodes:
        latest = max(nodes, key=lambda a: a["iteration"])
        if latest["status"] != "ok" and failure_chain(attempts, latest["iteration"]) <= ctx.max_repairs:
            return _item("repair", latest["iteration"], branch)
    return _item("initial", 0, branch)


# ---------------------------------------------------------------- policies: (state, ctx, n) -> expansions


def greedy_policy(state: PragmaState, ctx: Context, n: int) -> list[dict[str, Any]]:
    """The paper's step, n times: refine the historical best; before there is one, repair the last
    round's failures (or start afresh)."""
    best = state.get("best") or {}
    if best.get("iteration"):
        return [_item("refine", int(best["iteration"]), 0) for _ in range(n)]
    last_round = [a for a in state.get("attempts", []) if a.get("round") == state.get("round")]
    return [_fresh_or_repair(state, ctx, last_round[i : i + 1], i) for i in range(n)]


def beam_policy(state: PragmaState, ctx: Context, n: int) -> list[dict[str, Any]]:
    """n lineages (branches 0..n-1), each refined from its own best: repair its latest candidate
    when that failed (and repairs remain), else refine the fastest correct node of the branch."""
    attempts = _by_iteration(state)
    items = []
    for branch in range(n):
        nodes = [a for a in attempts.values() if int(a.get("branch", 0)) == branch]
        correct = [a for a in nodes if a["status"] == "ok"]
        latest = max(nodes, key=lambda a: a["iteration"]) if nodes else None
        if (
            latest is not None
            and latest["status"] != "ok"
            and failure_chain(attempts, latest["iteration"]) <= ctx.max_repairs
        ):
            items.append(_item("repair", latest["iteration"], branch))
        elif correct:
            items.append(_item("refine", max(correct, key=lambda a: a["speedup"])["iteration"], branch))
        else:
            items.append(_fresh_or_repair(state, ctx, nodes, branch))
    return items


def _prior(review: dict[str, Any] | None) -> float:
    guidance = (review or {}).get("guidance") or {}
    if guidance.get("should_stop") and not guidance.get("stop_overruled"):
        return PRIOR_STOP
    return PRIOR_LEAD if guidance.get("bottleneck") not in (None, "", "unknown") else 0.0


def tree_scores(state: PragmaState, ctx: Context, children: dict[int, int]) -> dict[int, float]:
    """UCB score of every expandable node (0: the root): exploitation is the node's speedup over
    the tree's fastest (a failed leaf: its parent's, it may be one fix away), exploration
    ``tree_exploration * sqrt(ln(total + 1) / (1 + children))``, plus the Conductor's prior."""
    attempts, reviews = _by_iteration(state), _reviews(state)
    fastest = max((a["speedup"] for a in attempts.values() if a["status"] == "ok"), default=0.0)
    total = sum(children.values())

    def explore(node: int) -> float:
        return ctx.tree_exploration * math.sqrt(math.log(total + 1) / (1 + children.get(node, 0)))

    def value(node: dict[str, Any]) -> float:
        return node["speedup"] / fastest if fastest > 0 else 0.0

    scores = {0: FRESH_START_VALUE + explore(0)}
    for it, a in attempts.items():
        if a["status"] == "ok":
            scores[it] = value(a) + explore(it) + _prior(reviews.get(it))
        elif children.get(it, 0) == 0 and failure_chain(attempts, it) <= ctx.max_repairs:
            parent = attempts.get(int(a.get("parent") or 0))
            base = value(parent) if parent and parent["status"] == "ok" else FRESH_START_VALUE
            scores[it] = base + explore(it) + _prior(reviews.get(it))
    return scores


def tree_policy(state: PragmaState, ctx: Context, n: int) -> list[dict[str, Any]]:
    """Best-first over the whole lineage tree: n times, expand the highest-scoring node, counting
    each pick as a child so the next pick weighs it (a node can be picked twice when it stays ahead)."""
    attempts = _by_iteration(state)
    children = _children(state)
    branches = {int(a.get("branch", 0)) for a in attempts.values()}
    items = []
    for _ in range(n):
        scores = tree_scores(state, ctx, children)
        node = max(scores, key=lambda k: (scores[k], -k))
        children[node] = children.get(node, 0) + 1
        if node == 0:
            branch = max(branches, default=-1) + 1
            branches.add(branch)
            items.append(_item("initial", 0, branch))
        else:
            a = attempts[node]
            items.append(_item("refine" if a["status"] == "ok" else "repair", node, int(a.get("branch", 0))))
    return items


POLICIES = {"greedy": greedy_policy, "beam": beam_policy, "tree": tree_policy}


# ---------------------------------------------------------------- nodes


def plan(state: PragmaState, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    done = state.get("iteration", 0)
    n = min(per_round(ctx), ctx.max_iterations - done)
    if ctx.max_llm_calls:
        # Every expansion costs one Coder call: a round never plans past the LLM-call budget.
        n = min(n, ctx.max_llm_calls - int((state.get("usage") or {}).get("llm_calls", 0)))
    reviews = _reviews(state)
    best = state.get("best") or {}
    # The historical best's review speaks for the run (its stop is the one routing weighs).
    update: dict[str, Any] = {"round": state.get("round", 0) + 1}
    if best.get("iteration") in reviews:
        update["guidance"] = reviews[best["iteration"]].get("guidance") or {}
    hardware = [r["hardware"] for r in state.get("reviews", []) if r.get("hardware")]
    if hardware and hardware[-1] != state.get("hardware"):
        update["hardware"] = hardware[-1]
    items = POLICIES[ctx.search](state, ctx, n) if n > 0 else []
    per_parent: dict[tuple[str, int], int] = {}
    for item in items:
        per_parent[(item["mode"], item["parent"])] = per_parent.get((item["mode"], item["parent"]), 0) + 1
    seen: dict[tuple[str, int], int] = {}
    for i, item in enumerate(items):
        key = (item["mode"], item["parent"])
        seen[key] = seen.get(key, 0) + 1
        item.update(iteration=done + 1 + i, round=update["round"], variant=seen[key], of=per_parent[key])
    update["plan"] = items
    return update


def _draft(state: PragmaState, iteration: int) -> dict[str, Any]:
    for d in state.get("drafts", []):
        if int(d["iteration"]) == iteration:
            return d
    attempt = _by_iteration(state)[iteration]
    return {"iteration": iteration, "code": attempt["code"], "origin": attempt.get("origin", "")}


def _as_result(attempt: dict[str, Any]) -> dict[str, Any]:
    """A lineage node's attempt record read back as the verifier result the nodes expect."""
    return {**attempt, **(attempt.get("failure") or {})}


def expansion_payload(state: PragmaState, item: dict[str, Any]) -> dict[str, Any]:
    """What one Coder call of the round sees: the state the greedy Coder would see if ``item``'s
    parent were the best (refine) or the last failure (repair)."""
    payload: dict[str, Any] = {
        "problem": state["problem"],
        "hardware": state.get("hardware", ""),
        "iteration": item["iteration"] - 1,
        "attempts": state.get("attempts", []),
        "expansion": item,
    }
    parent = _by_iteration(state).get(item["parent"])
    guidance = (_reviews(state).get(item["parent"]) or {}).get("guidance") or {}
    if parent is not None:
        payload["candidate"] = _draft(state, parent["iteration"])
        payload["verification"] = _as_result(parent)
    if item["mode"] == "refine" and parent is not None:
        payload["best"] = {
            "iteration": parent["iteration"],
            "code": parent["code"],
            "speedup": parent["speedup"],
            "runtime_ms": parent["runtime_ms"],
        }
        text = guidance.get("text") or (
            f"Make attempt {parent['iteration']} faster: it runs at {parent['speedup']:.3f}x of PyTorch."
        )
        payload["guidance"] = {"mode": "optimize", "text": text}
    elif item["mode"] == "repair" and parent is not None:
        text = (
            guidance.get("text")
            or hints.candidate_hints(payload["verification"], payload["candidate"])
            or (f"Attempt {parent['iteration']} failed ({parent['status']}): fix it.")
        )
        payload["guidance"] = {"mode": "repair", "text": text}
    if item.get("of", 1) > 1:
        payload["variant"] = VARIANT_TEXT.format(v=item["variant"], of=item["of"])
    return payload


def expand(payload: PragmaState, runtime: Runtime[Context]) -> dict:
    """The Coder for one expansion; its candidate joins the round through ``drafts``."""
    update = coder(payload, runtime)
    item = payload["expansion"]
    candidate = {
        **update.pop("candidate"),
        "parent": item["parent"],
        "branch": item["branch"],
        "round": item["round"],
    }
    update.pop("iteration", None)  # parallel branches: verify_next advances the count
    if candidate.get("format") == "kernel" and candidate.get("kernel"):
        # The round's candidates compile here, in parallel; verify_next then finds the build.
        started = time.monotonic()
        candidate["prebuild"] = prebuild_kernel(
            payload["problem"]["path"], candidate["kernel"], glue.ENTRY, runtime.context
        )
        candidate["prebuild_s"] = round(time.monotonic() - started, 3)
    return {**update, "drafts": [candidate]}


def pending_drafts(state: PragmaState) -> list[dict[str, Any]]:
    done = {int(a["iteration"]) for a in state.get("attempts", [])}
    return sorted((d for d in state.get("drafts", []) if int(d["iteration"]) not in done), key=lambda d: d["iteration"])


def verify_next(state: PragmaState, runtime: Runtime[Context]) -> dict:
    """Verify the round's next candidate against the historical best; crown it when accepted (its
    profile follows in its review)."""
    pending = pending_drafts(state)
    if not pending:
        return {}
    candidate = pending[0]
    update = verifier({**state, "candidate": candidate}, runtime)
    result = update["verification"]
    attempt = update["attempts"][0]
    attempt.update(branch=candidate.get("branch", 0), round=candidate.get("round", 0))
    if result["status"] != "ok":
        attempt["failure"] = {
            "checks": result.get("checks") or [],
            "log_tail": (result.get("log_tail") or "")[-FAILURE_TAIL_CHARS:],
        }
    update.update(candidate=candidate, iteration=max(state.get("iteration", 0), int(candidate["iteration"])))
    if result["status"] == "ok" and (crowned := acceptance.best_update(candidate, result, {})):
        update["best"] = crowned
        _remember(state, runtime.context, candidate, result, {})
    return update


def review_payloads(state: PragmaState, ctx: Context) -> list[dict[str, Any]]:
    """One review per candidate of the round just verified. When the run ends after this round, or
    the LLM-call budget cannot pay for every review, the rest are 'final': profiled, no LLM call
    (so the best still carries its profile)."""
    if ctx.agent_mode == "single-agent":
        return []  # no Profiler, no Conductor: the Coder reads the verifier's feedback itself
    this_round = [a for a in state.get("attempts", []) if a.get("round") == state.get("round")]
    ending = state.get("iteration", 0) >= ctx.max_iterations or budget_exhausted(state, ctx) is not None
    calls_left = ctx.max_llm_calls - int((state.get("usage") or {}).get("llm_calls", 0)) if ctx.max_llm_calls else None
    best = state.get("best") or {}
    # Correct candidates first, fastest first: they are the ones whose reviews the next round uses most.
    this_round.sort(key=lambda a: (a["status"] != "ok", -float(a.get("speedup", 0.0))))
    payloads = []
    for a in this_round:
        final = ending or (calls_left is not None and calls_left <= 0)
        if final and not (a["status"] == "ok" and best.get("iteration") == a["iteration"]):
            continue  # a final review only profiles the best
        if not final and calls_left is not None:
            calls_left -= 1
        payloads.append(
            {
                "problem": state["problem"],
                "hardware": state.get("hardware", ""),
                "iteration": state.get("iteration", 0),
                "attempts": state.get("attempts", []),
                "best": best,
                "candidate": _draft(state, a["iteration"]),
                "verification": _as_result(a),
                "final": final,
            }
        )
    return payloads


def review(payload: PragmaState, runtime: Runtime[Context]) -> dict:
    """Profile one verified candidate and ask what its children should do (the Conductor for a
    correct one, repair for a failed one). Written to ``reviews``: parallel reviews share no key."""
    ctx = runtime.context
    candidate, result = payload["candidate"], payload["verification"]
    entry: dict[str, Any] = {"iteration": candidate["iteration"]}
    update: dict[str, Any] = {}
    view: dict[str, Any] = dict(payload)
    if result["status"] == "ok":
        profile, hardware = profile_candidate(payload, ctx, candidate)
        entry.update(
            bottleneck=profile.get("bottleneck", "unknown"),
            confidence=profile.get("confidence", "none"),
            hardware=hardware,
        )
        view["profile"] = profile
        best = payload.get("best") or {}
        if best.get("iteration") == candidate["iteration"]:
            update["best"] = {"iteration": candidate["iteration"], "profile": profile}  # keep_best merges it
            view["best"] = {**best, "profile": profile}
        if payload.get("final"):
            return {**update, "reviews": [entry]}
        advice = conductor(view, runtime)
    else:
        if payload.get("final"):
            return {"reviews": [entry]}
        advice = repair(view, runtime)
    entry["guidance"] = advice.pop("guidance")
    return {**update, **advice, "reviews": [entry]}
