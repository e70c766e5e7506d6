"""Rule-based optimisation guidance (optimize_advice=rules): total over the bottleneck vocabulary,
worded from the profile's own evidence, and no model is asked.

The profile dicts below are written by hand with the keys tools/profilers/cpu.py emits (bottleneck,
bottleneck_evidence, roofline); they are not captured from a profiler run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import scripted

from pragma.graph.context import resolve_context
from pragma.nodes import playbook
from pragma.tools.profilers.bottleneck import VOCABULARY

PROFILE = {
    "bottleneck": "not-vectorized",
    "bottleneck_evidence": "scalar SSE in the hot loop (vector share 0%)",
    "roofline": {"status": "ok", "roofline_pct": 12.6, "bound_by": "memory", "roof_level": "L3"},
}


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("label", VOCABULARY)
def test_every_bottleneck_label_has_a_plan(label, backend):
    steps = playbook.plan_for(label, backend)
    assert steps and all(isinstance(s, str) and len(s) > 20 for s in steps)


def test_the_plan_follows_the_label_and_quotes_the_evidence():
    g = playbook.guidance_from_profile(PROFILE, {"iteration": 1, "speedup": 1.2}, 1.1, "cpu", no_profile=False)
    assert g["bottleneck"] == "not-vectorized" and g["should_stop"] is False and g["source"] == "rules"
    assert "scalar SSE in the hot loop" in g["text"]
    assert "13% of its bandwidth roof (L3)" in g["text"]
    assert "best so far is attempt 1 at 1.20x" in g["text"]
    assert playbook.CPU_PLANS["not-vectorized"][0] in g["text"]
    other = playbook.guidance_from_profile({**PROFILE, "bottleneck": "compute-bound"}, {}, 1.1, "cpu", False)
    assert playbook.CPU_PLANS["compute-bound"][0] in other["text"]
    assert playbook.CPU_PLANS["not-vectorized"][0] not in other["text"]


def test_no_profile_mode_sees_no_profile_evidence():
    g = playbook.guidance_from_profile(PROFILE, {}, 0.9, "cpu", no_profile=True)
    assert g["bottleneck"] == "unknown"
    assert "SSE" not in g["text"] and "roof" not in g["text"]
    assert playbook.CPU_PLANS["unknown"][0] in g["text"]


def test_a_label_outside_the_vocabulary_gets_the_generic_plan():
    g = playbook.guidance_from_profile({"bottleneck": "made-up"}, {}, 1.0, "gpu", no_profile=False)
    assert g["bottleneck"] == "unknown" and playbook.GPU_PLANS["unknown"][0] in g["text"]


def _state():
    return {
        "problem": {"name": "relu", "source": "x", "path": "relu.py"},
        "candidate": {"iteration": 2, "code": "code"},
        "verification": {"speedup": 1.1, "runtime_ms": 1.0, "ref_runtime_ms": 1.1},
        "best": {"iteration": 1, "speedup": 1.2, "code": "best"},
        "profile": PROFILE,
        "attempts": [],
    }


def test_rules_mode_asks_no_model(monkeypatch):
    from pragma.nodes import conductor, llm

    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for({}))  # any call would fail: empty script
    runtime = SimpleNamespace(context=resolve_context(coder_model="scripted:x", optimize_advice="rules"))
    update = conductor.conductor(_state(), runtime)
    assert update["guidance"]["bottleneck"] == "not-vectorized"
    assert update["log"][0]["source"] == "rules" and update["log"][0]["output_tokens"] == 0
    assert "usage" not in update


def test_optimize_advice_auto_is_rules_for_the_local_model_only():
    from pragma.nodes.conductor import advice_mode

    assert advice_mode(resolve_context(coder_model="local")) == "rules"
    assert advice_mode(resolve_context(coder_model="openai:big")) == "model"
    assert advice_mode(resolve_context(coder_model="local", optimize_advice="model")) == "model"
