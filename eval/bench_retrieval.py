"""Retrieval benchmark: recall@3 of the knowledge store on engineers' questions, and the time to
build the store from the seed compendium on this machine.

    python -m pragma.eval.bench_retrieval [--k 3] [--min-recall 0.9] [--verbose]

Runs in a temporary data directory, so the user's store is neither used nor changed. Two build
times are reported: cold (every document embedded now) and with the shipped seed vectors (what a
fresh machine pays on first use).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pragma.graph.clikit import out  # the CLI's consoles: plain text, no markup

QUESTIONS = Path(__file__).parent / "data" / "retrieval_questions.yaml"


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    return yaml.safe_load(path.read_text())["questions"]


def expected_ids(question: dict, index) -> set[str]:
    """Entry ids named by the question's metric names (each must name exactly one entry)."""
    ids = set()
    for name in question["expect"]:
        found = [e for e in index.lookup(name, question.get("backend")) if e.metric == name]
        if len(found) != 1:
            raise ValueError(f"{question['q']!r}: expected metric {name!r} matches {len(found)} entries")
        ids.add(found[0].entry_id)
    return ids


def evaluate(k: int = 3, verbose: bool = False) -> dict:
    from pragma.knowledge import retrieval

    index, _, _ = retrieval.load_index()
    questions = load_questions()
    recall_sum = hits = 0.0
    misses = []
    start = time.monotonic()
    for q in questions:
        want = expected_ids(q, index)
        got = [h.entry.entry_id for h in retrieval.find(q["q"], backend=q.get("backend"), k=k)]
        found = want & set(got)
        recall_sum += len(found) / len(want)
        hits += bool(found)
        if found != want:
            misses.append((q["q"], sorted(want - found), got))
    query_s = time.monotonic() - start
    if verbose:
        for q, missing, got in misses:
            out.out(f"MISS {q!r}\n  missing {missing}\n  got     {got}")
    return {
        "questions": len(questions),
        "recall": recall_sum / len(questions),
        "hit_rate": hits / len(questions),
        "misses": len(misses),
        "mean_query_ms": 1e3 * query_s / len(questions),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--min-recall", type=float, default=0.0, help="exit 1 below this recall@k")
    parser.add_argument("--verbose", action="store_true", help="print every question that misses")
    args = parser.parse_args(argv)
    from pragma.knowledge import store
    from pragma.knowledge.embedding import load_model
    from pragma.knowledge.seed import load_seed

    load_s = time.monotonic()
    load_model()  # torch import and weights: paid once per process, reported apart from the build
    load_s = time.monotonic() - load_s
    # Each build in a fresh data directory: the cold one may not reuse anything, and the warm one
    # gets only what the repository ships.
    os.environ["PRAGMA_DATA_DIR"] = tempfile.mkdtemp(prefix="pragma-bench-retrieval-")
    cold = store.build(load_seed(), use_vector_cache=False)
    os.environ["PRAGMA_DATA_DIR"] = tempfile.mkdtemp(prefix="pragma-bench-retrieval-")
    warm = store.build(load_seed())
    result = evaluate(args.k, args.verbose)
    load1, load5, _ = os.getloadavg()
    out.out(f"machine: {os.cpu_count()} cores, load average {load1:.2f} (1 min) {load5:.2f} (5 min)")
    out.out(f"seed compendium: {cold.entries} entries; embedding model load {load_s:.1f} s")
    out.out(f"store build from seed, cold (all {cold.embedded_now} documents embedded): {cold.build_s:.1f} s")
    out.out(
        f"store build from seed with the shipped vectors ({warm.embedded_now} not shipped, embedded now): "
        f"{warm.build_s:.2f} s"
    )
    out.out(
        f"recall@{args.k}: {result['recall']:.3f}  hit@{args.k}: {result['hit_rate']:.3f}  "
        f"({result['questions']} questions, {result['misses']} not fully answered, "
        f"{result['mean_query_ms']:.0f} ms per query)"
    )
    return 1 if result["recall"] < args.min_recall else 0


if __name__ == "__main__":
    sys.exit(main())
