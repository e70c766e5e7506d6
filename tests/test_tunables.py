"""Unit tests: the tunables syntax (tools/tunables.py), the tuner's walk (nodes/tune.py) and its routing."""

from __future__ import annotations

import ast
from types import SimpleNamespace

import pytest

from pragma.graph.context import Context
from pragma.graph.routing import candidates_written, route_after_tune, route_after_verifier, sweep_wanted
from pragma.nodes import tune
from pragma.tools import tunables

MODULE = '''import ctypes
from pragma_cext import load_cpp, ptr

CPP_SOURCE = r"""
#include <cstdint>
constexpr int TILE = 64;  // tune: 128 16 32
static constexpr int64_t UNROLL = 4; // tune: 1, 2, 4, 8
constexpr float SCALE = 0.5f; // tune: 0.25f 1.0f
const int NOTUNE = 3;
constexpr int BAD = 8; // tune: 4 eight
constexpr int EXPR = 2 * 4; // tune: 4 8
extern "C" void k(float* y, int64_t n) { for (int64_t i = 0; i < n; i += TILE) y[i] = SCALE; }
"""

_lib = load_cpp(CPP_SOURCE, name="k")
'''


def test_parse_finds_declared_tunables_in_numeric_order_with_the_default():
    found = {t.name: t for t in tunables.parse(MODULE)}
    assert list(found) == ["TILE", "UNROLL", "SCALE"]  # BAD (not a number) and EXPR (an expression) declare nothing
    assert found["TILE"].default == "64" and found["TILE"].values == ("16", "32", "64", "128")
    assert found["UNROLL"].values == ("1", "2", "4", "8")
    assert found["SCALE"].values == ("0.25f", "0.5f", "1.0f")


def test_variant_changes_one_literal_and_keeps_the_tune_comment():
    out = tunables.variant(MODULE, {"TILE": "32"})
    assert "constexpr int TILE = 32;  // tune: 128 16 32" in out
    assert out.replace("TILE = 32", "TILE = 64") == MODULE
    with pytest.raises(ValueError, match="not a numeric literal"):
        tunables.with_values(MODULE, {"TILE": "32; system(x)"})


def test_build_knobs_add_flags_to_the_build_call_and_the_prebuild_sees_them():
    dims = tunables.build_knobs(MODULE, has_avx512=True)
    assert [d["name"] for d in dims] == [tunables.VECTOR_WIDTH, tunables.UNROLL]
    # 512 bits is the default build's own width (cext.DEFAULT_FLAGS): only 256 builds something new,
    # and on an AVX2 machine no width does
    assert dims[0]["values"] == ["default", "256"]
    assert [d["name"] for d in tunables.build_knobs(MODULE, has_avx512=False)] == [tunables.UNROLL]
    out = tunables.variant(MODULE, {tunables.VECTOR_WIDTH: "256", tunables.UNROLL: "on"})
    ast.parse(out)
    assert "load_cpp(CPP_SOURCE, name=\"k\", extra_flags=('-mprefer-vector-width=256', '-funroll-loops'))" in out
    [job] = tunables.build_requests(out)
    assert job["name"] == "k" and job["flags"] == ["-mprefer-vector-width=256", "-funroll-loops"]
    assert "constexpr int TILE = 64;" in job["source"]
    # defaults add nothing; a kernel that already chose its flags gets no build knob
    assert tunables.variant(MODULE, {tunables.VECTOR_WIDTH: "default", tunables.UNROLL: "off"}) == MODULE
    assert tunables.build_knobs(out, has_avx512=True) == []
    assert tunables.build_knobs("x = 1\n", has_avx512=True) == []


def test_trailing_comma_in_the_build_call():
    code = 'from pragma_cext import load_cpp\nS = "int f(){return 1;}"\nlib = load_cpp(\n    S,\n    name="f",\n)\n'
    out = tunables.with_flags(code, ["-funroll-loops"])
    ast.parse(out)
    assert ",," not in out.replace(" ", "").replace("\n", "")
    assert tunables.build_requests(out)[0]["flags"] == ["-funroll-loops"]


def _sweep(values, default, trials=(), built=None, kind="tunable"):
    dims = [{"name": "T", "kind": kind, "default": default, "values": values}]
    s = {
        "dims": dims,
        "dim": 0,
        "direction": "up",
        "point": {"T": default},
        "point_speedup": 1.0,
        "trials": [],
        "built": built or {},
    }
    for value, improved in trials:
        s["trials"].append({"dim": "T", "value": value, "direction": s["direction"], "improved": improved})
        if improved:
            s["point"] = {"T": value}
        tune.next_value(s)  # advances the direction the way the node does between steps
    return s


def test_walk_goes_up_while_improving_then_stops():
    s = _sweep(["16", "32", "64", "128", "256"], "32")
    assert tune.next_value(s) == "64"
    s = _sweep(["16", "32", "64", "128", "256"], "32", [("64", True)])
    assert tune.next_value(s) == "128"
    s = _sweep(["16", "32", "64", "128", "256"], "32", [("64", True), ("128", False)])
    assert tune.next_value(s) is None  # worse one step further, and the way down is not searched


def test_walk_turns_down_when_the_first_step_up_is_worse_and_skips_failed_builds():
    s = _sweep(["8", "16", "32", "64"], "32", [("64", False)], built={"16": "compile_error"})
    assert tune.next_value(s) == "8"  # 16 failed to build: skipped, the walk goes on
    s = _sweep(["8", "16", "32", "64"], "32", [("64", False), ("16", False)])
    assert tune.next_value(s) is None


def test_build_knobs_try_every_value():
    s = _sweep(["default", "256", "512"], "default", kind="build")
    assert tune.next_value(s) == "256"
    s = _sweep(["default", "256", "512"], "default", [("256", False)], kind="build")
    assert tune.next_value(s) == "512"


def test_the_budget_keeps_room_for_the_winners_gate():
    # The gate is one verification at the run's settings, as long as the candidate's less its
    # compiles; a variant is timed only when it and the gate both fit what is left.
    verified = {"status": "ok", "speedup": 1.0, "wall_s": 30.0, "phases_s": {"build": 8.0, "check": 10.0}}
    assert tune.gate_reserve_s(verified) == 22.0
    s = {"trials": [{"wall_s": 10.0}], "spent_s": 30.0, "budget_s": 60.0, "gate_reserve_s": 22.0}
    assert not tune._time_left(s)  # 30 + 10 + 22 > 60: without the reserve this variant ran, then the gate
    assert tune._time_left({**s, "gate_reserve_s": 15.0})
    assert tune._time_left({k: v for k, v in s.items() if k != "gate_reserve_s"})  # a sweep checkpointed before
    # Once variants were timed, the gate is predicted from the longest: its rounds (three calls and
    # fresh inputs each) scale from 30 to the run's timed_calls, the rest (the timing slot's wait,
    # warm-up, checks) does not; a second pair of runners doubles the rounds unless the winner leads
    # by the confirmation margin. 36-problem suite: a GEMM's gate took 27 s where the candidate's own
    # verification took 4.4 s (63 s of 60 spent); a 1x1 convolution's 11 s time phase was mostly waiting.
    from pragma.tools.judging import acceptance

    trial = {"wall_s": 14.0, "time_s": 10.0, "round_ms": 120.0, "vs_point": 1.1, "improved": True}
    s = {"trials": [trial], "spent_s": 14.0, "budget_s": 60.0, "gate_reserve_s": 4.0}
    s |= {"variant_rounds": 30, "gate_rounds": Context().timed_calls, "gate_bar": 1.08}
    assert 1.1 < acceptance.CONFIRM_BELOW * 1.08  # a confirmation pair: twice the rounds
    assert tune.gate_estimate_s(s) == pytest.approx(14.0 - 3.6 + 100 * 0.12 * 2)
    assert not tune._time_left(s)  # 14 + 14 + 34.4 > 60: the second variant would leave no room for the gate
    lead = {**s, "trials": [{**trial, "vs_point": 2.0}]}  # a lead past the margin: one pair
    assert tune.gate_estimate_s(lead) == pytest.approx(14.0 - 3.6 + 100 * 0.12)
    assert tune._time_left(lead)  # 14 + 14 + 22.4 < 60
    old = {k: v for k, v in s.items() if k not in ("variant_rounds", "gate_rounds")}
    assert tune.gate_estimate_s({**old, "trials": [{"wall_s": 14.0}]}) == 14.0  # checkpointed before: the wall
    assert tune.gate_estimate_s({**s, "trials": [{"wall_s": 1.0, "time_s": 0.5}]}) == 4.0  # never below the reserve
    # Where not even the gate fits, nothing is built or timed: the sweep goes to its (skipped) gate.
    candidate = {"iteration": 1, "code": MODULE}
    assert tune.new_sweep(candidate, verified, Context(tune_budget_s=60))["phase"] == "build"
    assert tune.new_sweep(candidate, verified, Context(tune_budget_s=20))["phase"] == "gate"


def test_the_streaming_rewrite_is_a_dimension_where_it_applies_and_sends_a_kernel_to_the_tuner(monkeypatch):
    from pathlib import Path

    from pragma.nodes import playbook

    monkeypatch.setattr(playbook, "_has_avx", lambda: True)  # _mm256_stream_ps needs AVX
    relu = (Path(__file__).parent / "data" / "candidates" / "relu_fast.py").read_text()
    on, off = Context(tune_rewrites="on"), Context(tune_rewrites="off")
    assert tune.rewrite_dims(relu, on) == [
        {"name": tune.STREAMING, "kind": "build", "default": "off", "values": ["off", "on"]}
    ]
    assert tune.rewrite_dims(relu, off) == [] and tune.rewrite_dims(MODULE, on) == []  # MODULE: no map loop
    # 'auto': the embedded model only (the scripted one is not local)
    assert not tune.rewrites_on(Context(coder_model="scripted:x")) and tune.rewrites_on(Context(coder_model="local"))
    streamed = tune.variant(relu, {tune.STREAMING: "on", tunables.UNROLL: "on"})
    [job] = tunables.build_requests(streamed)
    assert "_mm256_stream_ps(y + ps_start + ps_j" in job["source"] and job["flags"] == ["-funroll-loops"]
    assert tune.variant(relu, {tune.STREAMING: "off"}) == relu
    assert tunables.describe({tune.STREAMING: "on"}, [{"name": tune.STREAMING, "default": "off"}]) == "streaming=on"
    state = {"verification": {"status": "ok"}, "candidate": {"iteration": 1, "code": relu}, "guidance": {}}
    assert sweep_wanted(state, on) and not sweep_wanted(state, off)  # no tunables, no Conductor's sweep
    assert not sweep_wanted({**state, "candidate": {"iteration": 2, "code": streamed}}, on)  # streams already


def _runtime(**kw):
    return SimpleNamespace(context=Context(**kw))


def test_routing_sends_a_tunable_candidate_to_the_tuner_once():
    state = {
        "verification": {"status": "ok"},
        "candidate": {"iteration": 1, "code": MODULE},
        "guidance": {},
        "attempts": [],
    }
    assert route_after_verifier(state, _runtime()) == "tune"
    assert route_after_verifier(state, _runtime(tune_budget_s=0)) == "profiler"
    swept = {**state, "sweeps": [{"base_sha": tune.code_sha(MODULE)}]}
    assert route_after_verifier(swept, _runtime()) == "profiler"
    plain = {**state, "candidate": {"iteration": 1, "code": tunables.with_values(MODULE, {}).replace("// tune:", "//")}}
    assert not sweep_wanted(plain, Context())
    # no tunables: only when the Conductor asks (then the build knobs)
    assert sweep_wanted({**plain, "guidance": {"sweep": True}}, Context())
    assert route_after_tune({"sweep": {"done": False}}, _runtime()) == "tune"
    assert route_after_tune({"sweep": {"done": True}}, _runtime()) == "profiler"


def test_tuned_children_do_not_count_as_written_candidates():
    state = {"iteration": 3, "attempts": [{"origin": "initial"}, {"origin": "tune"}, {"origin": "refine"}]}
    assert candidates_written(state) == 2


def _tuned_state() -> dict:
    attempt = {"status": "ok", "speedup": 1.0, "runtime_ms": 1.0, "ref_runtime_ms": 1.0, "max_abs_diff": 0.0}
    trials = [
        {
            "dim": "PASSES",
            "value": "4",
            "status": "ok",
            "speedup": 0.5,
            "vs_point": 5.0,
            "runtime_ms": 2.0,
            "wall_s": 3.0,
            "improved": True,
        },
        {
            "dim": "build:unroll",
            "value": "on",
            "status": "compile_error",
            "speedup": 0.0,
            "runtime_ms": 0.0,
            "wall_s": 1.5,
            "improved": False,
        },
    ]
    return {
        "problem": {"path": "p.py", "name": "p"},
        "iteration": 2,
        "attempts": [
            {**attempt, "iteration": 1, "origin": "initial", "parent": 0, "speedup": 0.1},
            {
                **attempt,
                "iteration": 2,
                "origin": "tune",
                "parent": 1,
                "guidance": "tuner: PASSES=4",
                "variants_timed": 2,
                "sweep_s": 7.5,
                "is_new_best": True,
                "params": {"PASSES": "4"},
            },
        ],
        "best": {"iteration": 2, "speedup": 1.0, "runtime_ms": 1.0, "ref_runtime_ms": 1.0, "code": "x"},
        "sweeps": [
            {
                "parent": 1,
                "dims": [{"name": "PASSES", "default": "16"}, {"name": "build:unroll", "default": "off"}],
                "trials": trials,
                "base_speedup": 0.1,
                "winner": {"PASSES": "4", "build:unroll": "off"},
                "winner_speedup": 0.5,
                "spent_s": 7.5,
                "budget_s": 60.0,
                "gate": "accepted: faster than the best",
                "child": 2,
                "accepted": True,
            },
        ],
        "usage": {"llm_calls": 1},
    }


def test_report_and_lineage_show_the_sweep_and_the_tuned_child():
    from pragma.graph import lineage
    from pragma.graph.report import render_report, spent

    state = _tuned_state()
    text = render_report(state, Context(), "t")
    assert "## Tuner sweeps" in text
    assert "Sweep of #1: 2 variants in 7.5 s (budget 60 s); base 0.100x, winner PASSES=4 0.500x; tuned child #2" in text
    assert "| PASSES | 4 | ok | 0.500x | 5.000x | 2.0000 | 3.0 | yes |" in text
    assert "| unroll | on | compile_error |  |  |  | 1.5 | no |" in text
    assert "#2 tune (PASSES=4; 2 variants, 8 s) · ok 1.000x · the best" in "\n".join(lineage.render_text(state))
    assert spent(state)["tune_s"] == 7.5 and "7.5 s in the tuner (2 variants" in text
    page = lineage.render_html(state, "t")
    assert "<h2>Tuner sweeps</h2>" in page and "<td>compile_error</td>" in page


def test_eval_counts_tuner_seconds_apart_from_llm_calls():
    from pragma.eval import metrics

    rows = [
        {
            "problem": "a",
            "mode": "pragma",
            "category": "x",
            "status": "finished",
            "solved": 1,
            "best_speedup": 2.0,
            "llm_calls": 3,
            "tune_s": 40.0,
            "wall_s": 100.0,
        },
        {
            "problem": "b",
            "mode": "pragma",
            "category": "x",
            "status": "finished",
            "solved": 1,
            "best_speedup": 1.0,
            "llm_calls": 1,
            "tune_s": 0.0,
            "wall_s": 20.0,
        },
    ]
    s = metrics.summarize(metrics.outcomes(rows, [("a", "x"), ("b", "x")], ["pragma"]))
    assert s["tune_s_per_problem"] == 20.0 and s["llm_calls_per_problem"] == 2.0


def test_the_conductor_can_ask_for_a_sweep_and_old_replies_still_parse():
    from pragma.nodes.conductor import parse_guidance

    assert parse_guidance('```json\n{"diagnosis": "d", "steps": [], "sweep": true}\n```').sweep is True
    assert parse_guidance('```json\n{"diagnosis": "d", "steps": [], "stop": false}\n```').sweep is False


def test_report_counts_the_coders_candidates_and_the_tuned_apart():
    from pragma.graph.report import render_report

    text = render_report(_tuned_state(), Context(), "t")
    assert "- candidates written: 1 (max_iterations=15), plus 1 tuned" in text
