"""The three agent modes in isolation: routing, what each LLM is shown, what the profiler skips."""

import pytest
from langgraph.graph import END

from pragma.graph.context import Context
from pragma.graph.routing import route_after_profiler, route_after_verifier
from pragma.nodes import chat, coder, conductor, profiler


class _Runtime:
    def __init__(self, **settings):
        self.context = Context(**settings)


@pytest.mark.parametrize(
    "mode, after_failure, after_profile",
    [
        ("pragma", "repair", "conductor"),
        ("no-profile", "repair", "conductor"),
        ("single-agent", "coder", "coder"),
    ],
)
def test_routing_per_mode(mode, after_failure, after_profile):
    rt = _Runtime(agent_mode=mode, max_iterations=5)
    assert (
        route_after_verifier({"verification": {"status": "mismatch"}, "iteration": 1, "consecutive_failures": 1}, rt)
        == after_failure
    )
    assert route_after_verifier({"verification": {"status": "ok"}, "iteration": 1}, rt) == "profiler"
    assert route_after_profiler({"iteration": 2}, rt) == after_profile
    # The same budget ends every mode.
    assert route_after_profiler({"iteration": 5}, rt) == END
    assert (
        route_after_verifier({"verification": {"status": "mismatch"}, "iteration": 5, "consecutive_failures": 1}, rt)
        == END
    )


PROBLEM = {"name": "leaky_relu", "source": "class Model: ...", "inputs": [], "init_inputs": []}
FAILED = {
    "status": "compile_error",
    "message": "CompileError: expected ';' before 'y'",
    "log_tail": "g++ said no",
    "speedup": 0.0,
    "runtime_ms": 0.0,
    "ref_runtime_ms": 0.0,
    "max_abs_diff": 0.0,
}


def test_single_agent_coder_reads_the_verifier_feedback(monkeypatch):
    seen = {}

    def ask(role, ctx, system, human, attempt, node="", **kwargs):  # kwargs: grammar (nodes/coder.py)
        seen.update(role=role, human=human, attempt=attempt)
        return "```python\nclass ModelNew: pass\n```", {}

    monkeypatch.setattr(chat, "ask", ask)
    state = {
        "problem": PROBLEM,
        "iteration": 1,
        "candidate": {"iteration": 1, "code": "broken kernel"},
        "verification": FAILED,
        "attempts": [{"iteration": 1, "status": "compile_error", "speedup": 0.0}],
    }
    update = coder.coder(state, _Runtime(agent_mode="single-agent"))
    assert update["candidate"]["origin"] == "repair" and seen["attempt"] == 2
    for text in (
        '<problem name="leaky_relu">',
        "<previous_candidate",
        "broken kernel",
        '<verifier status="compile_error"',
        "expected ';' before 'y'",
        "g++ said no",
        "attempt 1: compile_error",
    ):
        assert text in seen["human"], text
    # In the other modes the Coder reads the Conductor's instructions instead.
    repair_state = {**state, "guidance": {"mode": "repair", "text": "add the semicolon"}}
    coder.coder(repair_state, _Runtime(agent_mode="no-profile"))
    assert "add the semicolon" in seen["human"] and "<log_tail>" not in seen["human"]


def test_no_profile_mode_skips_the_tools_but_crowns_the_best(monkeypatch):
    def no_profiling(*args, **kwargs):
        raise AssertionError("no-profile mode must not profile")

    monkeypatch.setattr(profiler, "backend_for", no_profiling)
    result = {
        "status": "ok",
        "speedup": 1.8,
        "speedup_ci": [1.6, 2.0],
        "runtime_ms": 5.0,
        "ref_runtime_ms": 9.0,
        "is_new_best": True,
    }
    state = {"problem": {"path": "/x.py"}, "candidate": {"iteration": 3, "code": "kernel"}, "verification": result}
    update = profiler.profiler(state, _Runtime(agent_mode="no-profile"))
    assert update["profile"]["status"] == "skipped"
    assert update["best"]["iteration"] == 3 and update["best"]["speedup"] == 1.8


def test_no_profile_conductor_sees_only_correctness_and_time(monkeypatch):
    seen = {}

    def decide(ctx, system, human, attempt, tools=True):
        seen.update(system=system, human=human, tools=tools)
        return None, "free text guidance", {}

    monkeypatch.setattr(conductor, "decide", decide)
    monkeypatch.setattr(conductor, "knowledge_section", lambda profiles, ctx: "")
    state = {
        "problem": PROBLEM,
        "candidate": {"iteration": 2, "code": "kernel v2"},
        "verification": {"status": "ok", "speedup": 1.5, "runtime_ms": 6.0, "ref_runtime_ms": 9.0},
        "profile": {"status": "unavailable", "reason": "x", "diff_vs_best": "| ipc | 1.0 | 2.0 |"},
        "best": {
            "iteration": 1,
            "speedup": 1.2,
            "code": "kernel v1",
            "profile": {"status": "unavailable", "reason": "y"},
        },
        "attempts": [
            {"iteration": 1, "status": "ok", "speedup": 1.2},
            {"iteration": 2, "status": "ok", "speedup": 1.5},
        ],
    }
    update = conductor.conductor(state, _Runtime(agent_mode="no-profile", optimize_advice="model"))
    assert update["guidance"]["mode"] == "optimize"
    assert "profile" not in seen["human"].lower() and "ipc" not in seen["human"]
    assert 'runtime_ms="6.0000"' in seen["human"] and "kernel v1" in seen["human"]
    assert "No profiles" in seen["system"].replace("\n", " ") and not seen["tools"]  # no profiler-metric lookups
    conductor.conductor(state, _Runtime(agent_mode="pragma", optimize_advice="model"))
    assert "<current_profile>" in seen["human"] and "<profile_diff>" in seen["human"]
