"""Graph pieces in isolation: topology, reducers, routers, context precedence, code extraction."""

from pathlib import Path

import pytest
from langgraph.graph import END

from pragma.graph.builder import compile_app
from pragma.graph.context import Context, resolve_context
from pragma.graph.routing import route_after_conductor, route_after_profiler, route_after_verifier
from pragma.graph.state import add_usage, keep_best
from pragma.tools.extract import ExtractionError, extract_code

SNAPSHOT = Path(__file__).parent / "data" / "topology.mmd"


def test_topology_matches_snapshot():
    drawn = compile_app().get_graph().draw_mermaid()
    # To accept an intended change: regenerate the snapshot and review the diff.
    assert drawn == SNAPSHOT.read_text()
    edges = {(e.source, e.target, e.conditional) for e in compile_app().get_graph().edges}
    assert ("verifier", "repair", True) in edges and ("verifier", "profiler", True) in edges
    assert ("conductor", "coder", True) in edges and ("conductor", END, True) in edges
    # the tuner: its own node, entered from the verifier, looping one variant per step, then the profiler
    assert {("verifier", "tune", True), ("tune", "tune", True), ("tune", "profiler", True)} <= edges


def test_keep_best_only_moves_to_faster_and_merges_same_iteration():
    best = keep_best({}, {"iteration": 3, "speedup": 1.5})
    assert keep_best(best, {"iteration": 4, "speedup": 1.2}) == best
    assert keep_best(best, {"iteration": 5, "speedup": 2.0})["iteration"] == 5
    merged = keep_best(best, {"iteration": 3, "profile": {"bottleneck": "memory-bound"}})
    assert merged["speedup"] == 1.5 and merged["profile"]["bottleneck"] == "memory-bound"
    assert keep_best(best, None) == best


def test_add_usage_sums_counters():
    assert add_usage({"llm_calls": 1, "input_tokens": 10}, {"llm_calls": 1, "output_tokens": 5}) == {
        "llm_calls": 2,
        "input_tokens": 10,
        "output_tokens": 5,
    }


class _Runtime:
    def __init__(self, ctx):
        self.context = ctx


@pytest.mark.parametrize(
    "state, expected",
    [
        ({"verification": {"status": "ok"}, "iteration": 15}, "profiler"),
        ({"verification": {"status": "mismatch"}, "iteration": 2, "consecutive_failures": 1}, "repair"),
        ({"verification": {"status": "timeout"}, "iteration": 15, "consecutive_failures": 1}, END),
        ({"verification": {"status": "compile_error"}, "iteration": 6, "consecutive_failures": 5}, END),
    ],
)
def test_route_after_verifier(state, expected):
    assert route_after_verifier(state, _Runtime(Context(max_iterations=15, max_repairs=4))) == expected


def test_route_after_profiler_and_conductor_respect_limits():
    rt = _Runtime(Context(max_iterations=3, min_iterations=2))
    assert route_after_profiler({"iteration": 3}, rt) == END
    assert route_after_profiler({"iteration": 2}, rt) == "conductor"
    assert route_after_conductor({"iteration": 2, "guidance": {"should_stop": True}}, rt) == END
    assert route_after_conductor({"iteration": 2, "guidance": {"should_stop": False}}, rt) == "coder"


def test_context_precedence_explicit_over_env_over_default():
    env = {"PRAGMA_MAX_ITERATIONS": "7", "PRAGMA_ATOL": "1e-3"}
    assert resolve_context(env=env).max_iterations == 7
    assert resolve_context(env=env, max_iterations=3).max_iterations == 3
    assert resolve_context(env={}).max_iterations == 15
    assert resolve_context(env=env).atol == 1e-3
    with pytest.raises(ValueError, match="PRAGMA_MAX_ITERATIONS"):
        resolve_context(env={"PRAGMA_MAX_ITERATIONS": "many"})
    with pytest.raises(ValueError, match="unknown settings"):
        resolve_context(env={}, max_iters=3)


def test_extract_code_prefers_last_modelnew_block_and_drops_reasoning():
    reply = (
        "<think>```python\nclass ModelNew: pass  # draft\n```</think>\nFirst a helper:\n"
        "```cpp\nint x;\n```\nThe module:\n```python\nimport torch\nclass ModelNew:\n    final = 1\n```"
    )
    code = extract_code(reply)
    assert "final = 1" in code and "draft" not in code
    with pytest.raises(ExtractionError):
        extract_code("I cannot help with that.")


def test_unusable_reply_is_quoted_in_repair_prompts_not_the_placeholder(monkeypatch):
    """A reply without a ModelNew block fails as a candidate; the repair and the next Coder prompt
    show what the model wrote (a small model echoes a placeholder back if it is shown one)."""
    from types import SimpleNamespace

    import scripted

    from pragma.nodes import coder, llm, repair

    prose = "Use nn.ReLU().cuda() and it will be fast."
    script = {"coder": {"1": prose, "2": "..."}, "conductor": {"1": "Write the C++ kernel."}}
    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(script))
    prompts_seen: list[str] = []
    real_generate = scripted.ScriptedChatModel._generate

    def spy(self, messages, *args, **kwargs):
        prompts_seen.append("\n".join(str(m.content) for m in messages))
        return real_generate(self, messages, *args, **kwargs)

    monkeypatch.setattr(scripted.ScriptedChatModel, "_generate", spy)
    runtime = SimpleNamespace(context=resolve_context(coder_model="scripted:x"))
    state = {"problem": {"name": "relu", "source": "class Model: ...", "inputs": []}, "iteration": 0}
    state.update(coder.coder(state, runtime))
    assert "raise SyntaxError" in state["candidate"]["code"] and state["candidate"]["unusable_reply"] == prose
    state["verification"] = {"status": "compile_error", "message": "no ModelNew", "log_tail": ""}
    state.update(repair.repair(state, runtime))
    state["iteration"] = 1
    coder.coder(state, runtime)
    repair_prompt, coder_prompt = prompts_seen[1:]
    for prompt in (repair_prompt, coder_prompt):
        assert f"Your reply began:\n{prose}" in prompt and "raise SyntaxError" not in prompt


def test_a_run_without_a_kernel_says_why_from_its_last_attempt():
    from pragma.graph.runner import _why_none

    assert _why_none({}) == "no attempt was made"
    state = {
        "attempts": [
            {"status": "compile_error", "message": "x"},
            {"status": "mismatch", "message": "max abs diff 0.8\nmore"},
        ]
    }
    assert _why_none(state) == "2 attempt(s), the last one mismatch (max abs diff 0.8)"


def test_llm_usage_is_summed_per_attempt_once_and_every_view_agrees():
    # One attempt's Coder call and the Conductor call that read it are both charged to it; the
    # lineage tree, report.md and the eval's attempt rows read the same sums.
    from pragma.eval.job import JobSpec, attempt_rows
    from pragma.graph import lineage, report

    log = [
        {"attempt": 1, "role": "coder", "input_tokens": 100, "output_tokens": 20, "wall_s": 2.0, "cost_usd": 0.01},
        {"attempt": 1, "role": "conductor", "input_tokens": 50, "output_tokens": 5, "wall_s": 1.0, "cost_usd": 0.02},
        {"attempt": 2, "role": "coder", "input_tokens": 7, "output_tokens": 3, "wall_s": 0.5},
    ]
    attempts = [{"iteration": 1, "status": "ok", "wall_s": 4.0}, {"iteration": 2, "status": "mismatch"}]
    state = {"log": log, "attempts": attempts, "usage": {"input_tokens": 157, "output_tokens": 28, "cost_usd": 0.03}}
    sums = lineage.llm_by_attempt(state)
    assert sums[1] == {"input_tokens": 150.0, "output_tokens": 25.0, "wall_s": 3.0, "cost_usd": 0.03}
    assert sums[2]["cost_usd"] == 0.0 and sums[2]["input_tokens"] == 7.0
    assert lineage.costs(state) == {
        1: {"tokens": 175.0, "llm_s": 3.0, "verify_s": 4.0},
        2: {"tokens": 10.0, "llm_s": 0.5, "verify_s": 0.0},
    }
    assert "#1: 175 tokens, 3.0 s, $0.03000; #2: 10 tokens, 0.5 s, $0.00000" in "\n".join(report.render_usage(state))
    spec = JobSpec(
        run_id="r", problem={"name": "p"}, mode="pragma", context={}, results_url="", checkpoint_url="", out_dir=""
    )
    rows = attempt_rows(spec, state, {})
    assert [(r["input_tokens"], r["output_tokens"], r["cost_usd"], r["llm_wall_s"]) for r in rows] == [
        (150.0, 25.0, 0.03, 3.0),
        (7.0, 3.0, 0.0, 0.5),
    ]
