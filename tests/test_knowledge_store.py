"""The knowledge store with the real offline embedding model (all-MiniLM-L6-v2, run with torch)."""

from __future__ import annotations

import numpy as np
import pytest

from pragma.knowledge import retrieval, store, vectors
from pragma.knowledge.embedding import MiniLMEmbeddingFunction
from pragma.knowledge.seed import load_seed


@pytest.fixture(scope="module")
def ef():
    return MiniLMEmbeddingFunction()


def test_embeddings_are_unit_length_and_meaningful(ef):
    a, b, c = (
        np.asarray(v)
        for v in ef(
            ["The loop waits on DRAM bandwidth.", "Memory bandwidth limits this kernel.", "The cat sleeps on the sofa."]
        )
    )
    assert np.allclose([np.linalg.norm(a), np.linalg.norm(b), np.linalg.norm(c)], 1.0, atol=1e-5)
    assert a @ b > a @ c + 0.3
    # Padding in a batch must not change a sentence's vector.
    alone = np.asarray(ef(["short"])[0])
    batched = np.asarray(ef(["short", "a much longer sentence that pads the first one in its batch"])[0])
    assert np.abs(alone - batched).max() < 1e-5


def test_shipped_seed_vectors_match_the_real_model(ef):
    """The shipped vectors are a cache of this model's output, not something else."""
    seed = load_seed()
    sample = [seed[i].render() for i in range(0, len(seed), len(seed) // 5)]
    shipped, computed = vectors.embed(sample, ef)
    assert computed == 0
    fresh = ef(sample)
    for s, f in zip(shipped, fresh, strict=True):
        assert float(np.dot(s, f)) > 0.9999


def test_seed_build_and_semantic_search(ef):
    report = store.build(load_seed())
    assert report.entries == len(load_seed()) and report.embedded_now == 0
    hits = retrieval.search("the compiler left my loop scalar because pointers may overlap", backend="cpu", k=3)
    assert "missed_reason_aliasing" in [h.entry.metric for h in hits]
    hits = retrieval.find("is my triton matmul using tensor cores?", backend="gpu", k=3)
    assert any(h.entry.metric.startswith("sm__pipe_tensor") for h in hits)
    assert store.status().startswith(f"{report.entries} entries")


@pytest.mark.integration
def test_cold_seed_build_embeds_everything_and_meets_the_recall_target():
    from pragma.eval.bench_retrieval import evaluate

    report = store.build(load_seed(), use_vector_cache=False)
    assert report.embedded_now == report.entries
    result = evaluate(k=3)
    assert result["questions"] >= 40 and result["recall"] >= 0.9
