"""setup: load and probe the problem once, and describe the machine for the prompts."""

from __future__ import annotations

import time

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.tools import problem
from pragma.tools.backends import require


def setup(state: PragmaState, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    backend = require(ctx)  # backend=gpu on a machine without CUDA stops here, with one line
    given = state.get("problem") or {}
    if "inputs" not in given:
        if given.get("path"):
            loaded = problem.read_problem(given["path"])
        else:
            raise problem.ProblemError("the run input needs problem.path (a KernelBench problem file)")
        given = problem.probe_problem(
            loaded,
            num_threads=ctx.num_threads,
            seed=ctx.seed,
            warmup_calls=ctx.warmup_calls,
            warmup_s=ctx.warmup_s,
        )
    return {
        "problem": given,
        "hardware": backend.hardware_summary(ctx),
        "iteration": 0,
        "consecutive_failures": 0,
        "started_at": time.time(),
    }
