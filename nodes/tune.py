"""tune (no LLM): sweep a verified candidate's tunables and build knobs, one variant per graph step.

A candidate that declares tunables (tools/tunables.py: ``constexpr int TILE = 64; // tune: 16 32
64 128``), any C++ kernel when the Conductor asked for a sweep, or (``tune_rewrites``) a kernel a
rewrite applies to (streaming stores for an element-wise loop: ``STREAMING``, tried first) gets a
coordinate search: one
dimension at a time, from the declared default one value up while that improves, else down while
that improves, stopping a direction at the first variant that is not faster (build knobs, which
have no order, try each value). Each dimension's variants are compiled in parallel into the build
cache first (sandboxed ``build`` workers); a variant whose build fails is skipped. Each variant is
then verified in full (correctness, stress, held-out re-check) and timed in one sandboxed session
with the best point so far (``best_code``: interleaved with it and the reference); a variant counts
as better when its median speedup over that point exceeds 1 + ``SWEEP_MARGIN``.

The winner, if any variant was better, goes through the verifier's gate like any candidate: ``verify_candidate(..., best_code=...)`` against what will be the best
after this step (the candidate itself when the verifier accepted it, else the current best). It is
recorded as an attempt (origin ``tune``, its parameter values and the sweep's times); when accepted
it becomes the candidate the profiler profiles and crowns. No model is called.

Why one variant per step: the sweep's progress lives in state (``sweep``), checkpointed after every
step, so a run killed mid-sweep resumes at the next variant and times no finished one again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.nodes.verifier import ATTEMPT_KEYS, code_diff
from pragma.tools import tunables
from pragma.tools.backends import backend_for
from pragma.tools.judging import acceptance

log = logging.getLogger("pragma.tune")

# A variant is timed head to head with the best point so far (one session, interleaved): speedups
# over the reference taken in separate sessions differed by up to 20% for one GEMM at load 5 (a
# sweep picked NR=128 at 0.412x against 0.333x; the gate then timed it at 0.98x the original). A
# variant counts as better above this median ratio, so the walk does not follow noise; the gate's
# acceptance_margin is the real bar.
SWEEP_MARGIN = 0.02


def code_sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def _has_avx512() -> bool:
    from pragma.tools.hardware import cpu_spec

    return cpu_spec().get("simd") == "AVX-512"


# A rewrite of the kernel's source the tuner may try (kind "build": no order, each value tried).
STREAMING = "rewrite:streaming"


def rewrites_on(ctx: Context) -> bool:
    if ctx.tune_rewrites != "auto":
        return ctx.tune_rewrites == "on"
    from pragma.nodes import chat, llm

    return ctx.backend == "cpu" and llm.is_local(chat.model_spec("coder", ctx), "coder")


def _streamed(code: str) -> str:
    """The module ``code`` with its one C++ source's element-wise loop written with streaming
    stores, or '' where that does not apply (no such loop, several sources, a source not written out
    literally in the module)."""
    from pragma.nodes.playbook import streaming_code

    requests = tunables.build_requests(code)
    if len(requests) != 1 or code.count(source := requests[0]["source"]) != 1:
        return ""
    if not (streamed := streaming_code(source)):
        return ""
    out = code.replace(source, streamed)
    return out if [r["source"] for r in tunables.build_requests(out)] == [streamed] else ""


def rewrite_dims(code: str, ctx: Context) -> list[dict[str, Any]]:
    """The rewrites that apply to ``code`` as sweep dimensions (none unless ``rewrites_on``)."""
    if not rewrites_on(ctx) or not _streamed(code):
        return []
    return [{"name": STREAMING, "kind": "build", "default": "off", "values": ["off", "on"]}]


def variant(code: str, params: dict[str, str]) -> str:
    """The source of the point ``params``: its rewrites, then its tunables and build knobs."""
    if params.get(STREAMING) == "on":
        code = _streamed(code) or code
    return tunables.variant(code, {k: v for k, v in params.items() if not k.startswith("rewrite:")})


def gate_reserve_s(result: dict[str, Any]) -> float:
    """Seconds kept free inside the budget for the winner's gate before any variant was timed: the
    gate is one verification at the run's settings, like the candidate's own, less its compiles
    (the winner and the best come from the build cache by then)."""
    phases = result.get("phases_s") or {}
    compiles = float(phases.get("build", 0.0)) + float(phases.get("build_best", 0.0))
    return max(0.0, float(result.get("wall_s", 0.0)) - compiles)


def gate_estimate_s(sweep: dict[str, Any]) -> float:
    """The winner's gate, as the timed variants predict it. A variant is head to head like the gate
    (candidate, best point and reference in each round), but in ``SWEEP_TIMED_CALLS`` rounds where
    the gate times the run's ``timed_calls``, and the gate times a second pair of runners (as many
    rounds again) unless the winner leads by the judge's confirmation margin
    (``acceptance.CONFIRM_BELOW`` x the bar). So a variant's seconds are split: its rounds (the round's
    three calls and fresh inputs, from its own samples) scale to the gate's, the rest (waiting for the
    timing slot, warm-up, checks, sandbox start) is taken as is. The longest variant's estimate, so
    it holds under the load that slowed it. Why not the candidate's own verification alone: it had no
    best beside it, and the gates of the 36-problem suite took 1.3-6x it (a GEMM's 27 s against 4.4 s:
    63 s spent of a 60 s budget); why not the variant's time phase scaled whole: under load most of
    it was the slot's wait (a 1x1 convolution's 11 s time phase, a gate of 16 s)."""
    variant_rounds = float(sweep.get("variant_rounds", 0.0))  # absent in sweeps checkpointed before
    gate_rounds = float(sweep.get("gate_rounds", 0.0))
    lead = 1.0
    for t in sweep["trials"]:
        if t.get("improved"):
            lead *= float(t.get("vs_point") or 1.0)
    pairs = 1 if lead >= acceptance.CONFIRM_BELOW * float(sweep.get("gate_bar", 1.0)) else 2
    reserve = float(sweep.get("gate_reserve_s", 0.0))
    for t in sweep["trials"]:
        round_s = float(t.get("round_ms", 0.0)) / 1000.0
        rounds_s = min(float(t.get("time_s", 0.0)), variant_rounds * round_s)
        reserve = max(reserve, float(t["wall_s"]) - rounds_s + gate_rounds * round_s * pairs)
    return reserve


def new_sweep(candidate: dict[str, Any], result: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The sweep's state for a freshly verified candidate (JSON-native: it is checkpointed)."""
    # The rewrite first: the build knobs and tunables are then searched on the kernel it made.
    dims = rewrite_dims(candidate["code"], ctx) + tunables.dimensions(
        candidate["code"], has_avx512=_has_avx512(), build=ctx.backend == "cpu"
    )
    point = {d["name"]: d["default"] for d in dims}
    sweep = {
        "base_sha": code_sha(candidate["code"]),
        "parent": int(candidate["iteration"]),
        "dims": dims,
        "point": point,  # the best point so far
        "point_speedup": float(result.get("speedup", 0.0)),
        "base_speedup": float(result.get("speedup", 0.0)),
        "base_runtime_ms": float(result.get("runtime_ms", 0.0)),
        "dim": 0,  # index of the dimension being searched
        "direction": "up",
        "built": {},  # value -> build status, for the current dimension
        "trials": [],  # every variant tried: {dim, value, params, status, speedup, runtime_ms, wall_s}
        "phase": "build",
        "spent_s": 0.0,
        "budget_s": float(ctx.tune_budget_s),
        "gate_reserve_s": gate_reserve_s(result),
        # what gate_estimate_s scales a variant's rounds by, and the bar of the gate's confirmation
        "variant_rounds": min(ctx.timed_calls, SWEEP_TIMED_CALLS),
        "gate_rounds": ctx.timed_calls,
        "gate_bar": acceptance.bar(float(ctx.acceptance_margin)),
        "gate": {},
        "done": False,
    }
    # Nothing to sweep, or not even the gate fits the budget: straight to the (skipped) gate.
    if not dims or not _time_left(sweep):
        sweep["phase"] = "gate"
    return sweep


def _dim_values(sweep: dict[str, Any]) -> list[str]:
    """Every value of the current dimension other than its default (what the dimension may try)."""
    d = sweep["dims"][sweep["dim"]]
    return [v for v in d["values"] if v != d["default"]]


def _point_with(sweep: dict[str, Any], value: str) -> dict[str, str]:
    d = sweep["dims"][sweep["dim"]]
    return {**sweep["point"], d["name"]: value}


def next_value(sweep: dict[str, Any]) -> str | None:
    """The next value of the current dimension to time, or None when the dimension is done.

    Ordered dimensions (tunables) walk up from the default while each step improves, and walk
    down only when the first step up did not; build knobs try every value. Values whose build
    failed are skipped without stopping the walk.
    """
    d = sweep["dims"][sweep["dim"]]
    tried = {t["value"]: t for t in sweep["trials"] if t["dim"] == d["name"]}
    failed = {v for v, status in sweep["built"].items() if status != "ok"}
    if d["kind"] == "build":
        return next((v for v in _dim_values(sweep) if v not in tried and v not in failed), None)
    values, best_value = d["values"], sweep["point"][d["name"]]

    def walk(direction: str, step: int) -> str | None:
        taken = [t for t in sweep["trials"] if t["dim"] == d["name"] and t.get("direction") == direction]
        if taken and not taken[-1]["improved"]:
            return None  # this direction got worse: stop it
        i = values.index(best_value) + step
        while 0 <= i < len(values) and values[i] in failed:
            i += step
        return values[i] if 0 <= i < len(values) and values[i] not in tried else None

    if sweep["direction"] == "up":
        if (value := walk("up", 1)) is not None:
            return value
        if best_value != d["default"]:
            return None  # the walk up improved: the other side is not searched
        sweep["direction"] = "down"
    return walk("down", -1)


def _prebuild(problem_path: str, codes: list[str], ctx: Context) -> list[str]:
    """Compile each variant's C++ into the build cache, in parallel sandboxed build workers;
    returns a status per variant ('ok', or why its build failed)."""
    from pragma.tools.verify import prebuild

    def one(code: str) -> str:
        return prebuild(problem_path, code, ctx)

    if not codes:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(len(codes), os.cpu_count() or 1))) as pool:
        return list(pool.map(one, codes))


# A variant is verified in full (correctness on fresh inputs, stress variants, held-out re-check),
# but timed with fewer rounds and one correctness trial: the sweep only ranks variants, and the
# winner's gate runs the run's own settings. A GEMM's verification took 50 s at the defaults and
# 28 s with these at load 5 on 2 cores (the sandbox's start and the timing slot's waits dominate).
SWEEP_TIMED_CALLS = 30
SWEEP_CORRECTNESS_TRIALS = 1


def sweep_context(ctx: Context) -> Context:
    from pragma.graph.context import context_to_dict, resolve_context

    settings = context_to_dict(ctx)
    settings["timed_calls"] = min(ctx.timed_calls, SWEEP_TIMED_CALLS)
    settings["correctness_trials"] = min(ctx.correctness_trials, SWEEP_CORRECTNESS_TRIALS)
    return resolve_context(env={}, **settings)


def _time_left(sweep: dict[str, Any]) -> bool:
    """Whether another variant fits the budget: the seconds spent, plus the median variant's so far
    (a variant's verification takes 1-20 s here, most of it under load), plus the gate's estimate,
    stay below it. So a sweep ends before the budget rather than one long variant after it, and
    the winner's gate fits too (before the reserve, a 60 s sweep took up to 75 s with its gate)."""
    walls = sorted(float(t["wall_s"]) for t in sweep["trials"])
    expected = walls[len(walls) // 2] if walls else 0.0
    return sweep["spent_s"] + expected + gate_estimate_s(sweep) < sweep["budget_s"]


def _step(state: PragmaState, ctx: Context, sweep: dict[str, Any]) -> dict[str, Any]:
    """One unit of work: build a dimension's variants, time one variant, or run the gate."""
    base = state["candidate"]
    path = state["problem"]["path"]
    if sweep["phase"] == "build":
        values = _dim_values(sweep)
        codes = [variant(base["code"], _point_with(sweep, v)) for v in values]
        sweep["built"] = dict(zip(values, _prebuild(path, codes, ctx), strict=True))
        sweep["phase"] = "time"
        failed = [v for v, status in sweep["built"].items() if status != "ok"]
        name = tunables.label(sweep["dims"][sweep["dim"]]["name"])
        sweep["last"] = f"built {len(values)} variant(s) of {name}" + (
            f" ({len(failed)} failed to build: {', '.join(failed)}; skipped)" if failed else ""
        )
        return sweep
    if sweep["phase"] == "time":
        value = next_value(sweep) if _time_left(sweep) else None
        if value is None:
            sweep.pop("last", None)  # nothing new to print: the last variant's line was printed once
            sweep["dim"] += 1
            sweep["direction"], sweep["built"] = "up", {}
            sweep["phase"] = "build" if sweep["dim"] < len(sweep["dims"]) and _time_left(sweep) else "gate"
            return sweep
        d = sweep["dims"][sweep["dim"]]
        params = _point_with(sweep, value)
        # Head to head: the variant timed against the best point so far, interleaved in one session.
        res = backend_for(ctx).verify(
            path,
            variant(base["code"], params),
            sweep_context(ctx),
            best_code=variant(base["code"], sweep["point"]),
            best_speedup=sweep["point_speedup"],
        )
        speedup = float(res["speedup"]) if res["status"] == "ok" else 0.0
        vs_point = float(res.get("speedup_vs_best") or 0.0) if res["status"] == "ok" else 0.0
        improved = vs_point > 1.0 + SWEEP_MARGIN
        sweep["trials"].append(
            {
                "dim": d["name"],
                "value": value,
                "direction": sweep["direction"] if d["kind"] == "tunable" else "",
                "params": params,
                "status": res["status"],
                "speedup": speedup,
                "vs_point": vs_point,  # median speedup over the best point so far, same session
                "runtime_ms": float(res["runtime_ms"]),
                "wall_s": float(res["wall_s"]),
                "time_s": float((res.get("phases_s") or {}).get("time", 0.0)),  # its time phase
                # one timed round: the three calls and the round's fresh inputs (gate_estimate_s)
                "round_ms": sum(
                    float(res.get(k) or 0.0)
                    for k in ("runtime_ms", "best_runtime_ms", "ref_runtime_ms", "fresh_inputs_ms_per_round")
                ),
                "improved": improved,
                "message": "" if res["status"] == "ok" else str(res["message"])[:300],
            }
        )
        if improved:
            sweep["point"], sweep["point_speedup"] = params, speedup
        how = f"{speedup:.3f}x ({vs_point:.3f}x the best point)" if res["status"] == "ok" else res["status"]
        sweep["last"] = f"{tunables.label(d['name'])}={value}: {how} in {float(res['wall_s']):.1f} s" + (
            ", better" if improved else ", not better"
        )
        return sweep
    # phase gate: the winner is verified like any candidate, against what will be the best.
    defaults = {d["name"]: d["default"] for d in sweep["dims"]}
    if sweep["point"] == defaults:
        sweep["gate"] = {"status": "skipped", "acceptance": "no variant beat the candidate"}
    else:
        best = state.get("best") or {}
        base_result = state.get("verification") or {}
        gate_best = base["code"] if base_result.get("is_new_best") or not best.get("code") else best["code"]
        gate_best_speedup = (
            float(base_result.get("speedup", 0.0)) if gate_best == base["code"] else float(best.get("speedup", 0.0))
        )
        res = backend_for(ctx).verify(
            path,
            variant(base["code"], sweep["point"]),
            ctx,
            best_code=gate_best,
            best_speedup=gate_best_speedup,
        )
        sweep["gate"] = {"result": res, "against": "candidate" if gate_best == base["code"] else "best"}
    sweep["phase"], sweep["done"] = "done", True
    gate = sweep["gate"]
    sweep["last"] = f"winner {tunables.describe(sweep['point'], sweep['dims'])} ({sweep['point_speedup']:.3f}x): " + (
        gate["result"]["acceptance"] if "result" in gate else gate["acceptance"]
    )
    return sweep


def _finish(state: PragmaState, sweep: dict[str, Any]) -> dict[str, Any]:
    """The state update of a finished sweep: its record, and the tuned child when one was gated."""
    base = state["candidate"]
    gate = sweep["gate"]
    res = gate.get("result")
    record = {
        "parent": sweep["parent"],
        "base_sha": sweep["base_sha"],
        "dims": sweep["dims"],
        "trials": [
            {k: v for k, v in t.items() if k != "message"} | {"message": t.get("message", "")} for t in sweep["trials"]
        ],
        "base_speedup": sweep["base_speedup"],
        "winner": sweep["point"],
        "winner_speedup": sweep["point_speedup"],
        "spent_s": round(sweep["spent_s"], 3),
        "budget_s": sweep["budget_s"],
        "gate": "" if res is None else res["acceptance"],
        "child": 0,
        "accepted": False,
    }
    update: dict[str, Any] = {"sweep": sweep}
    if res is not None:
        iteration = int(state.get("iteration", 0)) + 1
        code = variant(base["code"], sweep["point"])
        params = tunables.describe(sweep["point"], sweep["dims"])
        child = {
            "iteration": iteration,
            "code": code,
            "origin": "tune",
            "format": base.get("format", "module"),
            "parent": int(base["iteration"]),
            "branch": int(base.get("branch", 0) or 0),
            "round": int(base.get("round", 0) or 0),
            "guidance": f"tuner: {params}",
        }
        if base.get("kernel"):
            from pragma.tools import glue

            # What the model is shown of it: the tuned module's C++ without PRAGMA's prelude.
            child["kernel"] = glue.kernel_of(code) or tunables.with_values(
                base["kernel"], {k: v for k, v in sweep["point"].items() if not k.startswith(("build:", "rewrite:"))}
            )
        attempt = {
            "iteration": iteration,
            "origin": "tune",
            "code_sha256": code_sha(code),
            "code": code,
            "parent": int(base["iteration"]),
            "diff": code_diff(base["code"], code, int(base["iteration"])),
            "guidance": child["guidance"],
            "finished_at": time.time(),
            "params": dict(sweep["point"]),
            "sweep_s": round(sweep["spent_s"], 3),
            "variants_timed": len(sweep["trials"]),
            **{k: res[k] for k in ATTEMPT_KEYS},
        }
        record.update(child=iteration, accepted=bool(res["is_new_best"]))
        update.update(attempts=[attempt], iteration=iteration)
        if res["is_new_best"]:
            # The profiler profiles and crowns it next (the best always carries its profile).
            update.update(candidate=child, verification=res)
    update["sweeps"] = [record]
    return update


def tune(state: PragmaState, runtime: Runtime[Context]) -> dict:
    candidate = state["candidate"]
    sweep = dict(state.get("sweep") or {})
    if sweep.get("base_sha") != code_sha(candidate["code"]) or sweep.get("done"):
        sweep = new_sweep(candidate, state["verification"], runtime.context)
    t0 = time.monotonic()
    sweep = _step(state, runtime.context, sweep)
    sweep["spent_s"] = float(sweep["spent_s"]) + (time.monotonic() - t0)
    if sweep["done"]:
        out = _finish(state, sweep)
        log.info("sweep of #%s done in %.1f s: %s", sweep["parent"], sweep["spent_s"], out["sweeps"][0]["gate"])
        return out
    return {"sweep": sweep}
