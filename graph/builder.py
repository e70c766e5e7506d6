"""Graph builder. ``graph`` (for langgraph.json / Studio) is compiled without a checkpointer,
because the LangGraph server supplies its own; ``compile_app`` serves the CLI, eval and tests.

    START -> setup -> coder -> verifier --fail--> repair -> coder
                                         \\--pass--> [tune x N] -> profiler -> conductor --continue--> coder
                                                                          \\--stop------> END

With ``search`` beam or tree (or ``candidates_per_round`` > 1) setup routes to the rounds of
nodes/search.py instead: plan -> Send x N -> expand -> verify_next (one per step) -> Send x M ->
review -> plan. Both paths are in one graph, so Studio draws the fan-out and a Context picks the path.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from pragma.graph.context import Context
from pragma.graph.lock import one_process
from pragma.graph.routing import (
    route_after_conductor,
    route_after_plan,
    route_after_profiler,
    route_after_repair,
    route_after_setup,
    route_after_tune,
    route_after_verifier,
    route_after_verify_next,
)
from pragma.graph.state import InputState, PragmaState
from pragma.nodes import llm
from pragma.nodes.coder import coder
from pragma.nodes.conductor import conductor
from pragma.nodes.profiler import profiler
from pragma.nodes.repair import repair
from pragma.nodes.search import expand, plan, review, verify_next
from pragma.nodes.setup import setup
from pragma.nodes.tune import tune
from pragma.nodes.verifier import verifier

# Transient LLM failures (connection, timeout, 429, 5xx) are retried here and only here
# (the OpenAI client's own retries are off): 3 attempts, 2 s then 4 s apart.
LLM_RETRY = RetryPolicy(max_attempts=3, initial_interval=2.0, retry_on=llm.is_transient)


def build_graph() -> StateGraph:
    builder = StateGraph(PragmaState, context_schema=Context, input_schema=InputState)
    # one_process: a node runs only while no other process advances its thread (graph/lock.py).
    builder.add_node("setup", one_process(setup))
    builder.add_node("coder", one_process(coder), retry_policy=LLM_RETRY)
    builder.add_node("verifier", one_process(verifier))
    builder.add_node("repair", one_process(repair), retry_policy=LLM_RETRY)
    builder.add_node("tune", one_process(tune))
    builder.add_node("profiler", one_process(profiler))
    builder.add_node("conductor", one_process(conductor), retry_policy=LLM_RETRY)
    builder.add_node("plan", one_process(plan))
    builder.add_node("expand", one_process(expand), retry_policy=LLM_RETRY)
    builder.add_node("verify_next", one_process(verify_next))
    builder.add_node("review", one_process(review), retry_policy=LLM_RETRY)
    builder.add_edge(START, "setup")
    builder.add_conditional_edges("setup", route_after_setup)
    builder.add_edge("coder", "verifier")
    builder.add_conditional_edges("verifier", route_after_verifier)
    builder.add_conditional_edges("repair", route_after_repair)
    # Send fan-outs: the path lists name the targets so Studio draws the edges.
    builder.add_conditional_edges("plan", route_after_plan, ["expand", END])
    builder.add_edge("expand", "verify_next")  # the round joins: verify_next runs once all expansions wrote
    builder.add_conditional_edges("verify_next", route_after_verify_next, ["verify_next", "review", "plan"])
    builder.add_edge("review", "plan")
    builder.add_conditional_edges("tune", route_after_tune)
    builder.add_conditional_edges("profiler", route_after_profiler)
    builder.add_conditional_edges("conductor", route_after_conductor)
    return builder


def compile_app(checkpointer=None):
    return build_graph().compile(checkpointer=checkpointer)


graph = compile_app()
