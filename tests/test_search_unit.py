"""Search policies, round planning, budgets and the lineage drawing, on hand-built states (no
sandbox, no LLM): what each policy expands, how a round is sized and numbered, what a review sees."""

from types import SimpleNamespace

import pytest
from langgraph.graph import END
from langgraph.types import Send

from pragma.eval.harness import HarnessError, check_modes
from pragma.eval.job import mode_settings
from pragma.graph import lineage
from pragma.graph.context import Context
from pragma.graph.routing import budget_exhausted, route_after_plan, route_after_repair, route_after_setup
from pragma.nodes import search

PROBLEM = {"path": "/p/relu.py", "name": "relu", "source": "class Model: ..."}


def attempt(i: int, status: str = "ok", speedup: float = 1.0, parent: int = 0, branch: int = 0, rnd: int = 1):
    return {
        "iteration": i,
        "origin": "initial" if not parent else ("refine" if status == "ok" else "repair"),
        "status": status,
        "speedup": speedup,
        "runtime_ms": 1.0 / max(speedup, 1e-9),
        "code": f"# code {i}\n",
        "parent": parent,
        "branch": branch,
        "round": rnd,
        "message": "" if status == "ok" else f"{status} in attempt {i}",
    }


def state_of(*attempts, best: int | None = None, **extra):
    state = {
        "problem": PROBLEM,
        "attempts": list(attempts),
        "drafts": [{"iteration": a["iteration"], "code": a["code"], "parent": a["parent"]} for a in attempts],
        "iteration": max((a["iteration"] for a in attempts), default=0),
        "round": max((a["round"] for a in attempts), default=0),
        "usage": {},
    }
    if best is not None:
        b = next(a for a in attempts if a["iteration"] == best)
        state["best"] = {"iteration": best, "code": b["code"], "speedup": b["speedup"], "runtime_ms": b["runtime_ms"]}
    return {**state, **extra}


def run_plan(state, **knobs):
    return search.plan(state, SimpleNamespace(context=Context(**knobs)))


def test_greedy_with_several_candidates_refines_the_best_each_time_and_numbers_the_variants():
    s = state_of(attempt(1, speedup=1.5), attempt(2, "mismatch", parent=1), best=1)
    items = run_plan(s, search="greedy", candidates_per_round=3, max_iterations=10)["plan"]
    assert [(i["mode"], i["parent"]) for i in items] == [("refine", 1)] * 3
    assert [i["iteration"] for i in items] == [3, 4, 5]
    assert [(i["variant"], i["of"]) for i in items] == [(1, 3), (2, 3), (3, 3)]
    payload = search.expansion_payload(s, items[1])
    assert "variant 2 of 3" in payload["variant"] and payload["best"]["iteration"] == 1
    assert payload["iteration"] == 3  # the Coder writes iteration + 1


def test_beam_refines_each_lineage_from_its_own_best_and_repairs_its_latest_failure():
    s = state_of(
        attempt(1, speedup=2.0, branch=0),
        attempt(2, speedup=1.2, branch=1),
        attempt(3, speedup=1.0, parent=1, branch=0, rnd=2),  # slower than its parent: lineage 0 keeps #1
        attempt(4, "compile_error", parent=2, branch=1, rnd=2),
        best=1,
    )
    items = run_plan(s, search="beam", candidates_per_round=2, max_iterations=10)["plan"]
    assert [(i["mode"], i["parent"], i["branch"]) for i in items] == [("refine", 1, 0), ("repair", 4, 1)]
    repair = search.expansion_payload(s, items[1])
    assert repair["guidance"]["mode"] == "repair" and repair["candidate"]["iteration"] == 4
    assert repair["verification"]["status"] == "compile_error"


def test_a_search_repair_of_a_kernel_that_skipped_its_given_form_is_told_to_call_it():
    # The same fixed hints as the greedy loop's repair node (nodes/hints.candidate_hints).
    s = state_of(attempt(1, speedup=2.0), attempt(2, "mismatch", parent=1, rnd=2), best=1)
    s["drafts"][1].update(kernel="out0[i] = v / (1.0f + v);", given_call="silu_fn", format="kernel")
    items = run_plan(s, search="beam", candidates_per_round=2, max_iterations=10)["plan"]
    repair = search.expansion_payload(s, next(i for i in items if i["mode"] == "repair"))
    assert repair["guidance"]["text"].startswith("- your kernel does not call `silu_fn`")


def test_beam_gives_up_repairing_a_lineage_after_max_repairs_and_starts_it_afresh():
    chain = [attempt(1, "mismatch", branch=0)] + [
        attempt(i, "mismatch", parent=i - 1, branch=0, rnd=i) for i in range(2, 4)
    ]
    s = state_of(*chain)
    assert search.failure_chain({a["iteration"]: a for a in chain}, 3) == 3
    items = run_plan(s, search="beam", candidates_per_round=1, max_iterations=10, max_repairs=2)["plan"]
    assert [(i["mode"], i["parent"]) for i in items] == [("initial", 0)]


def test_tree_prefers_the_fastest_node_then_explores_and_weighs_the_conductors_diagnosis():
    s = state_of(attempt(1, speedup=1.0), attempt(2, speedup=3.0, branch=1), best=2)
    items = run_plan(s, search="tree", candidates_per_round=2, max_iterations=10)["plan"]
    assert items[0]["parent"] == 2 and items[0]["mode"] == "refine"
    # A stop from the Conductor on the fastest node moves the first pick elsewhere.
    stopped = {**s, "reviews": [{"iteration": 2, "guidance": {"should_stop": True, "text": "at the roof"}}]}
    scores = search.tree_scores(stopped, Context(search="tree"), search._children(stopped))
    plain = search.tree_scores(s, Context(search="tree"), search._children(s))
    assert scores[2] == pytest.approx(plain[2] + search.PRIOR_STOP)
    # Before any correct node, failed leaves are repaired before a third fresh start.
    failed = state_of(attempt(1, "compile_error"), attempt(2, "mismatch", branch=1))
    picks = run_plan(failed, search="tree", candidates_per_round=2, max_iterations=10)["plan"]
    assert sorted((i["mode"], i["parent"]) for i in picks) == [("repair", 1), ("repair", 2)]


def test_a_round_is_cut_to_max_iterations_and_to_the_llm_call_budget():
    s = state_of(attempt(1, speedup=1.0), best=1, usage={"llm_calls": 8})
    assert len(run_plan(s, search="beam", candidates_per_round=4, max_iterations=3)["plan"]) == 2
    assert len(run_plan(s, search="beam", candidates_per_round=4, max_llm_calls=9)["plan"]) == 1
    spent = {**s, "plan": run_plan(s, search="beam", candidates_per_round=4, max_llm_calls=8)["plan"]}
    assert spent["plan"] == []
    rt = SimpleNamespace(context=Context(search="beam", max_llm_calls=8))
    assert route_after_plan(spent, rt) == END
    assert "max_llm_calls=8" in budget_exhausted(s, Context(max_llm_calls=8))
    assert route_after_repair(s, rt) == END
    assert route_after_repair(s, SimpleNamespace(context=Context())) == "coder"


def test_the_round_fans_out_one_send_per_expansion_and_greedy_keeps_the_papers_topology():
    s = state_of(attempt(1, speedup=1.0), best=1)
    s = {**s, **run_plan(s, search="beam", candidates_per_round=2, max_iterations=10)}
    sends = route_after_plan(s, SimpleNamespace(context=Context(search="beam")))
    assert all(isinstance(x, Send) and x.node == "expand" for x in sends)
    assert [x.arg["expansion"]["iteration"] for x in sends] == [2, 3]
    assert route_after_setup({}, SimpleNamespace(context=Context())) == "coder"
    assert route_after_setup({}, SimpleNamespace(context=Context(candidates_per_round=2))) == "plan"
    assert route_after_setup({}, SimpleNamespace(context=Context(search="tree"))) == "plan"


def test_reviews_of_a_final_round_only_profile_the_best_and_respect_the_call_budget():
    s = state_of(attempt(1, speedup=1.0), attempt(2, "mismatch", branch=1), attempt(3, speedup=2.0, rnd=2), best=3)
    s["round"] = 2
    final = search.review_payloads({**s, "iteration": 3}, Context(max_iterations=3))
    assert [(p["candidate"]["iteration"], p["final"]) for p in final] == [(3, True)]
    going = search.review_payloads(
        {**state_of(attempt(1, speedup=1.0), attempt(2, "mismatch", branch=1)), "usage": {"llm_calls": 4}},
        Context(max_iterations=9, max_llm_calls=5),
    )
    # One call left: the correct candidate gets the Conductor; the failure is not reviewed.
    assert [(p["candidate"]["iteration"], p["final"]) for p in going] == [(1, False)]


def test_lineage_draws_each_attempt_under_its_parent():
    s = state_of(
        attempt(1, "compile_error"),
        attempt(2, speedup=1.1, branch=1),
        attempt(3, speedup=0.5, parent=1, rnd=2),
        attempt(4, speedup=2.5, parent=2, branch=1, rnd=2),
        best=4,
    )
    s["attempts"][3]["is_new_best"] = True
    text = lineage.render_text(s)
    assert text == [
        "- #1 initial · compile_error",
        "  - #3 refine · ok 0.500x",
        "- #2 initial · ok 1.100x",
        "  - #4 refine · ok 2.500x · the best",
    ]
    mermaid = "\n".join(lineage.render_mermaid(s))
    assert "n0 --> n1" in mermaid and "n1 --> n3" in mermaid and "n2 --> n4" in mermaid and "n4[" in mermaid
    s["log"] = [{"attempt": 4, "input_tokens": 300, "output_tokens": 200, "wall_s": 2.5}]
    s["attempts"][3]["wall_s"] = 3.25
    page = lineage.render_html(s, "t")
    assert page.count("<li>") == 4 and "the best" in page
    assert "500 tokens, 2.5 s LLM, 3.2 s verifier" in page  # the cost of #4
    # Attempts from before lineage was kept hang under the attempt before them.
    old = {
        "attempts": [{"iteration": 1, "status": "ok", "speedup": 1.0}, {"iteration": 2, "status": "ok", "speedup": 2.0}]
    }
    assert lineage.render_text(old) == ["- #1 · ok 1.000x", "  - #2 · ok 2.000x"]


def test_eval_modes_cross_agent_modes_with_searches():
    assert check_modes(["pragma", "no-profile"], ["greedy", "beam"]) == [
        "pragma",
        "pragma+beam",
        "no-profile",
        "no-profile+beam",
    ]
    assert check_modes(["pragma+tree", "pragma+greedy"]) == ["pragma+tree", "pragma"]
    assert mode_settings("no-profile+tree") == {"agent_mode": "no-profile", "search": "tree"}
    assert mode_settings("pragma") == {"agent_mode": "pragma", "search": "greedy"}
    with pytest.raises(HarnessError, match="unknown mode"):
        check_modes(["pragma+dfs"])
    with pytest.raises(HarnessError, match="unknown search"):
        check_modes(["pragma"], ["mcts"])
