"""Conductor stops need evidence (issue 13): honoured only after min_iterations and with the best
kernel near the roof of the level its working set lives in; overruled otherwise, and state and
report say why. The Conductor is the scripted model (tests/scripted.py) answering stop=true."""

import json
from types import SimpleNamespace

import pytest
import scripted
from langgraph.graph import END

from pragma.graph.context import resolve_context
from pragma.graph.report import render_report
from pragma.graph.routing import route_after_conductor, stop_verdict
from pragma.nodes import conductor, llm
from pragma.tools.profilers import roofline

STOP = (
    "```json\n"
    + json.dumps(
        {
            "diagnosis": "at the memory roof",
            "bottleneck": "memory-bound",
            "steps": [],
            "extra_metrics": [],
            "stop": True,
        }
    )
    + "\n```"
)


PEAK = {
    "status": "ok",
    "fma_gflops_1t": 100.0,
    "fma_gflops_all": 180.0,
    "triad_gbs_1t": 22.0,
    "triad_gbs_all": 47.0,
    "cores": 2,
    "levels": [
        {"name": "L2", "size_bytes": 524288, "shared": False, "gbs_1t": 100.0, "gbs_all": 194.0},
        {"name": "L3", "size_bytes": 33554432, "shared": True, "gbs_1t": 48.0, "gbs_all": 125.0},
    ],
}


def _roof(bandwidth_pct: float) -> dict:
    """max-pool's roofline (2.35 MB working set, fits L3: 48 GB/s) at ``bandwidth_pct`` of that roof."""
    ms = 2.35e6 / (bandwidth_pct / 100 * 48e9) * 1e3
    return roofline.compute({"flops": 0.3e6, "min_bytes": 2.35e6}, ms, PEAK, 1)


def _state(iteration: int, roof: dict) -> dict:
    profile = {
        "status": "ok",
        "roofline": roof,
        "metrics": {},
        "sources": ["wall clock"],
        "confidence": "timing-only",
        "bottleneck": "cache-resident",
    }
    return {
        "problem": {"name": "max_pool", "source": "class Model: ...", "path": "p.py"},
        "hardware": "2 cores",
        "iteration": iteration,
        "attempts": [
            {
                "iteration": i,
                "status": "ok",
                "speedup": 40.0,
                "runtime_ms": 0.1,
                "ref_runtime_ms": 4.0,
                "max_abs_diff": 0.0,
            }
            for i in range(1, iteration + 1)
        ],
        "candidate": {"iteration": iteration, "code": "..."},
        "verification": {"speedup": 46.9, "runtime_ms": 0.1, "ref_runtime_ms": 4.7},
        "profile": profile,
        "best": {
            "iteration": iteration,
            "speedup": 46.9,
            "code": "...",
            "profile": profile,
            "runtime_ms": 0.1,
            "ref_runtime_ms": 4.7,
        },
    }


@pytest.fixture
def stopping_conductor(monkeypatch):
    script = {"conductor": {str(i): STOP for i in range(1, 10)}}
    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(script))


def _decide(state: dict, ctx) -> tuple[dict, str]:
    update = conductor.conductor(state, SimpleNamespace(context=ctx))
    after = {**state, **update, "stop_overrules": update.get("stop_overrules", [])}
    return after, route_after_conductor(after, SimpleNamespace(context=ctx))


def test_stop_before_min_iterations_is_overruled_and_reported(stopping_conductor):
    ctx = resolve_context(coder_model="scripted:coder", min_iterations=4, max_iterations=8, knowledge_tool_calls=0)
    state, route = _decide(_state(2, _roof(95.0)), ctx)
    assert state["guidance"]["should_stop"] and route == "coder"
    assert "only 2 of min_iterations=4" in state["guidance"]["stop_overruled"]
    assert "overruled" in state["guidance"]["text"]  # the Coder is told to go on
    report = render_report(state, ctx, "t")
    assert "stop after attempt 2 was overruled: only 2 of min_iterations=4" in report


def test_stop_far_from_the_cache_roof_is_overruled(stopping_conductor):
    # issue 13's max-pool: "97% of the DRAM roof" but 46% of the L3 roof its working set fits.
    ctx = resolve_context(coder_model="scripted:coder", min_iterations=2, max_iterations=8, knowledge_tool_calls=0)
    state, route = _decide(_state(3, _roof(46.0)), ctx)
    assert route == "coder"
    why = state["stop_overrules"][0]["reason"]
    assert "46% of its memory roof" in why and "fits L3" in why and "below the 80%" in why


def test_stop_at_the_roof_after_min_iterations_is_honoured(stopping_conductor):
    ctx = resolve_context(coder_model="scripted:coder", min_iterations=2, max_iterations=8, knowledge_tool_calls=0)
    state, route = _decide(_state(3, _roof(88.0)), ctx)
    assert route == END and "stop_overruled" not in state["guidance"] and not state["stop_overrules"]
    report = render_report(state, ctx, "t")
    assert "stopped because: the Conductor judged further gains unlikely (the best kernel reaches 88%" in report


def test_compute_side_and_missing_roofline_verdicts():
    ctx = resolve_context(min_iterations=1)
    compute = {"status": "ok", "bound_by": "compute", "roofline_pct": 30.0, "peak_gflops": 100.0}
    assert stop_verdict(_state(2, compute), ctx)[0] is False
    assert stop_verdict(_state(2, {**compute, "roofline_pct": 85.0}), ctx)[0] is True
    honoured, why = stop_verdict(_state(2, {"status": "unavailable"}), ctx)
    assert honoured and "no roofline" in why
    assert resolve_context(env={}).min_iterations == 4


def test_stop_above_the_roof_is_overruled(stopping_conductor):
    # The demo's ReLU profile read 158% of its DRAM roof: the roof did not bound that kernel, so it
    # says nothing about being at the limit (a faster ReLU exists).
    ctx = resolve_context(coder_model="scripted:coder", min_iterations=2, max_iterations=8, knowledge_tool_calls=0)
    state, route = _decide(_state(3, _roof(158.0)), ctx)
    assert route == "coder"
    why = state["stop_overrules"][0]["reason"]
    assert "158% of its memory roof" in why and "above its roof" in why
    assert stop_verdict(_state(3, _roof(110.0)), ctx)[0] is True  # within measurement noise of the roof


def test_an_overruled_stop_gives_the_coder_steps_not_stop_then_go_on(monkeypatch):
    """Ablation transcripts: the Coder read "1. Stop and keep attempt 1 as the final kernel" then "The
    stop was overruled: keep optimizing", and wrote wrapper-only edits."""
    reply = {
        "diagnosis": "at the memory roof",
        "bottleneck": "memory-bound",
        "steps": [
            "Stop and keep attempt 2 as the final kernel.",
            "Only if another candidate is mandated: keep attempt 2's 4x4 tile and its loop order exactly.",
            "Prefetch the next row.",
        ],
        "extra_metrics": [],
        "stop": True,
    }
    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for({"conductor": {"2": json.dumps(reply)}}))
    ctx = resolve_context(coder_model="scripted:coder", min_iterations=4, max_iterations=8, knowledge_tool_calls=0)
    state, route = _decide(_state(2, _roof(95.0)), ctx)
    text = state["guidance"]["text"]
    assert route == "coder" and "Stop and keep" not in text and "Only if another" not in text
    # The new approach first (2026-11-28 transcripts: a conv1d Coder took "1. Only if another candidate
    # is mandated: keep attempt 1's tile exactly" as its step and resubmitted the best).
    assert "1. The Conductor saw little left to gain, but the stop was overruled" in text
    assert "\n2. Prefetch the next row." in text
    assert f"more than {1 + ctx.acceptance_margin:.2f}x" in text
