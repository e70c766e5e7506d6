"""verifier (no LLM): compile, check and time the candidate in the sandbox; record the attempt.

The current historical best is timed in the same sandbox run (interleaved with the reference and
the candidate), so the result carries the acceptance decision ``is_new_best`` that the profiler
uses to crown a new best.
"""

from __future__ import annotations

import difflib
import hashlib
import time

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.tools.backends import backend_for

ATTEMPT_KEYS = (
    "status",
    "message",
    "speedup",
    "speedup_ci",
    "runtime_ms",
    "ref_runtime_ms",
    "max_abs_diff",
    "mean_abs_diff",
    "wall_s",
    "num_threads",
    "is_new_best",
    "speedup_vs_best",
    "is_suspicious",
    "extra_batches",
    "sequential_decision_changed",
)


# A lineage node keeps its diff against its parent, cut to this size (the code itself is kept whole).
DIFF_CHARS = 4000


def code_diff(parent_code: str, code: str, parent: int) -> str:
    """Unified diff of a candidate against its parent, at most DIFF_CHARS characters."""
    lines = difflib.unified_diff(
        parent_code.splitlines(), code.splitlines(), f"attempt {parent}", "this attempt", lineterm="", n=1
    )
    text = "\n".join(lines)
    return text if len(text) <= DIFF_CHARS else text[:DIFF_CHARS] + f"\n... ({len(text) - DIFF_CHARS} more characters)"


def verifier(state: PragmaState, runtime: Runtime[Context]) -> dict:
    candidate = state["candidate"]
    best = state.get("best") or {}
    # Through the backend (tools/backends.py), like the profiler node: one seam per backend, and the
    # conformance test (tests/test_backend_conformance.py) checks this method for every backend.
    result = backend_for(runtime.context).verify(
        state["problem"]["path"],
        candidate["code"],
        runtime.context,
        best_code=best.get("code") or None,
        best_speedup=float(best.get("speedup", 0.0)),
    )
    parent = int(candidate.get("parent") or 0)
    parent_code = next((a["code"] for a in state.get("attempts", []) if a["iteration"] == parent), "")
    attempt = {
        "iteration": candidate["iteration"],
        "origin": candidate.get("origin", ""),
        "code_sha256": hashlib.sha256(candidate["code"].encode()).hexdigest(),
        "code": candidate["code"],
        # The lineage (graph/lineage.py): where it came from, what changed, what produced it.
        "parent": parent,
        "diff": code_diff(parent_code, candidate["code"], parent) if parent_code else "",
        "guidance": candidate.get("guidance", ""),
        "finished_at": time.time(),
        **{k: result[k] for k in ATTEMPT_KEYS},
    }
    failures = 0 if result["status"] == "ok" else state.get("consecutive_failures", 0) + 1
    return {"verification": result, "attempts": [attempt], "consecutive_failures": failures}
