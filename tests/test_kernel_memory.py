"""The memory of verified kernels: shipped seeds that really verify, a real Chroma collection with the
offline embedding, growth from accepted bests (and the opt-out), retrieval into the Coder's prompt
within its token budget, and `pragma knowledge kernels list|query`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import scripted
from conftest import EXAMPLES, pragma_env

from pragma.graph.context import resolve_context
from pragma.knowledge import kernels
from pragma.tools import glue
from pragma.tools.problem import load_problem
from pragma.tools.verify import verify_candidate

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "eval" / "suites" / "cpu"


@pytest.mark.integration
@pytest.mark.parametrize("entry", json.loads((kernels.SEED_DIR / "manifest.json").read_text()), ids=lambda e: e["name"])
def test_every_shipped_seed_kernel_passes_the_real_verifier(entry):
    problem = load_problem(ROOT / entry["problem"])
    code = glue.module_source(glue.kernel_spec(problem), (kernels.SEED_DIR / entry["kernel"]).read_text())
    result = verify_candidate(problem["path"], code, resolve_context(timed_calls=5, warmup_calls=1))
    assert result["status"] == "ok", result["message"]


def test_seeds_are_retrieved_by_operator_similarity():
    assert {r["name"] for r in kernels.listing()} >= {"relu", "softmax", "sum_reduction", "matmul"}
    assert kernels.query((SUITE / "log_softmax.py").read_text(), k=1)[0]["name"] == "softmax"
    assert kernels.query((SUITE / "mm_square_odd.py").read_text(), k=1)[0]["name"] == "matmul"
    assert kernels.query((SUITE / "leaky_relu.py").read_text(), k=1)[0]["name"] == "relu"
    # Restricted to the problem's category: batch norm's nearest kernels are normalizations only.
    batch_norm = (SUITE / "batch_norm_train.py").read_text()
    assert {r["category"] for r in kernels.query(batch_norm, k=4, category="normalization")} == {"normalization"}
    assert kernels.query(batch_norm, k=4, category="no-such-category") == []


def test_memory_keeps_the_fastest_kernel_per_problem():
    source = (SUITE / "silu.py").read_text()
    rid = kernels.add(source=source, name="silu", code="// v1", fmt="kernel", speedup=1.3)
    kernels.add(source=source, name="silu", code="// slower", fmt="kernel", speedup=1.1)
    assert {r["id"]: r["code"] for r in kernels.listing()}[rid] == "// v1"
    kernels.add(source=source, name="silu", code="// v2", fmt="kernel", speedup=1.8)
    row = {r["id"]: r for r in kernels.listing()}[rid]
    assert row["code"] == "// v2" and row["category"] == "activation" and row["origin"] == "run"


def test_a_changed_shipped_seed_replaces_its_old_record_but_not_a_runs_kernel():
    seeds = {s["name"]: s for s in kernels.seed_records()}
    relu, softmax = seeds["relu"], seeds["softmax"]
    # A store written by an older PRAGMA: relu's seed had other code; softmax's was beaten by a run.
    kernels.add(source=relu["source"], name="relu", code="// old seed", fmt="kernel", speedup=1.0, origin="seed")
    kernels.add(source=softmax["source"], name="softmax", code="// a run's", fmt="kernel", speedup=9.0)
    kernels.ensure()
    rows = {r["name"]: r for r in kernels.listing()}
    assert rows["relu"]["code"] == relu["code"] and rows["relu"]["speedup"] == relu["speedup"]
    assert rows["softmax"]["code"] == "// a run's" and rows["softmax"]["origin"] == "run"


def test_render_respects_the_token_budget():
    found = kernels.query((SUITE / "sigmoid.py").read_text(), k=4)
    small = kernels.render(found, 200)
    assert kernels.render(found, 0) == "" and len(small) // 3 <= 200
    assert kernels.render(found, 5000).count("<verified_kernel ") > small.count("<verified_kernel ")


def _spy(monkeypatch, script):
    from pragma.nodes import llm

    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(script))
    seen: list[str] = []
    real = scripted.ScriptedChatModel._generate

    def spy(self, messages, *args, **kwargs):
        seen.append("\n".join(str(m.content) for m in messages))
        return real(self, messages, *args, **kwargs)

    monkeypatch.setattr(scripted.ScriptedChatModel, "_generate", spy)
    return seen


def test_coder_prompt_shows_similar_verified_kernels_but_not_the_answer(monkeypatch):
    from pragma.nodes import coder

    seen = _spy(monkeypatch, {"coder": {"1": "```cpp\n// none\n```"}})
    source = (EXAMPLES / "softmax.py").read_text()
    kernels.add(source=source, name="softmax_from_a_run", code="// run", fmt="module", speedup=2.0)
    other = (SUITE / "log_softmax.py").read_text()
    kernels.add(source=other, name="logsm_kernel_of_a_run", code="// log", fmt="kernel", speedup=1.2)
    state = {"problem": {"name": "softmax", "source": source, "inputs": []}, "iteration": 0}
    coder.coder(state, SimpleNamespace(context=resolve_context(coder_model="scripted:x")))
    section = seen[0][seen[0].index("<verified_kernels") :]
    assert 'name="logsm_kernel_of_a_run" category="normalization"' in section
    # Kernels for this very problem, shipped or from an earlier run, are left out, and so are
    # other categories' (the ReLU seed is an activation).
    assert 'name="softmax"' not in section and "softmax_from_a_run" not in section
    assert 'name="relu"' not in section
    coder.coder(state, SimpleNamespace(context=resolve_context(coder_model="scripted:x", kernel_memory=False)))
    assert "<verified_kernels" not in seen[1]


def test_unshared_memory_shows_only_shipped_kernels_and_adds_none(monkeypatch):
    # pragma eval's default: compared modes and runs cannot hand each other kernels through the store.
    from pragma.nodes import coder
    from pragma.nodes.profiler import _remember

    seen = _spy(monkeypatch, {"coder": {"1": "```cpp\n// none\n```"}})
    kernels.add(
        source=(EXAMPLES / "softmax.py").read_text(), name="softmax_of_a_run", code="// run", fmt="module", speedup=2.0
    )
    source = (SUITE / "log_softmax.py").read_text()
    state = {"problem": {"name": "log_softmax", "source": source, "inputs": []}, "iteration": 0}
    coder.coder(state, SimpleNamespace(context=resolve_context(coder_model="scripted:x")))
    assert "softmax_of_a_run" in seen[0]
    # (the shipped softmax kernel is longer than the default section's budget)
    ctx = resolve_context(coder_model="scripted:x", kernel_memory_shared=False, kernel_memory_tokens=5000)
    coder.coder(state, SimpleNamespace(context=ctx))
    section = seen[1][seen[1].index("<verified_kernels") :]
    assert 'name="softmax" category="normalization"' in section and "softmax_of_a_run" not in section
    candidate = {"iteration": 2, "code": "module", "kernel": "// logsm", "format": "kernel"}
    _remember(state, resolve_context(kernel_memory_shared=False), candidate, {"speedup": 1.5}, {})
    assert "log_softmax" not in {r["name"] for r in kernels.listing()}


@pytest.mark.integration  # load_problem probes the problem in a subprocess
def test_a_kernel_prompt_that_hands_over_the_whole_body_shows_no_memory_kernels(monkeypatch):
    # Shown the memory's l2_normalize kernel, the embedded model wrote batch_norm_train as that row
    # loop instead of pasting the body <formulas> gave (probe emb1128p2): nothing is to be borrowed there.
    from pragma.nodes import coder

    seen = _spy(monkeypatch, {"coder": {"1": "```cpp\n// none\n```", "2": "```python\n# none\n```"}})
    kernels.add(
        source=(SUITE / "l2_normalize.py").read_text(), name="l2_of_a_run", code="// l2", fmt="kernel", speedup=1.3
    )
    state = {"problem": load_problem(SUITE / "log_softmax.py"), "iteration": 0}
    coder.coder(state, SimpleNamespace(context=resolve_context(coder_model="scripted:x", candidate_format="kernel")))
    assert "<formulas" in seen[0] and "<verified_kernels" not in seen[0]
    coder.coder(state, SimpleNamespace(context=resolve_context(coder_model="scripted:x", candidate_format="module")))
    assert 'name="l2_of_a_run"' in seen[1]  # a module-format prompt (no body given) still shows it


def test_an_accepted_best_grows_the_memory_unless_opted_out():
    from pragma.nodes.profiler import _remember

    source = (SUITE / "elu.py").read_text()
    state = {"problem": {"name": "elu", "source": source}}
    candidate = {"iteration": 2, "code": "module", "kernel": "// elu kernel", "format": "kernel"}
    result = {"status": "ok", "speedup": 1.7}
    _remember(state, resolve_context(kernel_memory=False), candidate, result, {"bottleneck": "memory-bound"})
    assert "elu" not in {r["name"] for r in kernels.listing()}
    _remember(state, resolve_context(), candidate, result, {"bottleneck": "memory-bound", "confidence": "simulation"})
    row = next(r for r in kernels.listing() if r["name"] == "elu")
    assert row["code"] == "// elu kernel" and row["speedup"] == 1.7 and "memory-bound" in row["profile_summary"]


@pytest.mark.integration
def test_cli_lists_and_queries_the_memory(isolated_data_dir):
    env = pragma_env(isolated_data_dir)
    listed = subprocess.run(
        [sys.executable, "-m", "pragma.graph.cli", "knowledge", "kernels", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr
    assert "normalization" in listed.stdout and "softmax" in listed.stdout and "seed" in listed.stdout
    queried = subprocess.run(
        [
            sys.executable,
            "-m",
            "pragma.graph.cli",
            "knowledge",
            "kernels",
            "query",
            str(SUITE / "log_softmax.py"),
            "--k",
            "1",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout)[0]["name"] == "softmax"
    missing = subprocess.run(
        [sys.executable, "-m", "pragma.graph.cli", "knowledge", "kernels", "query", "/nonexistent/p.py"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 2 and "problem file not found" in (missing.stderr + missing.stdout)


@pytest.mark.integration
def test_kernels_another_process_added_are_found_by_a_filtered_query_here(isolated_data_dir):
    # pragma eval --workers 2 runs jobs in separate interpreters sharing the memory: this process
    # has queried (and loaded Chroma's index) before another one adds kernels; its next filtered
    # query must see them (a cached client failed here with "Error finding id").
    silu = (SUITE / "silu.py").read_text()
    assert [r["name"] for r in kernels.query(silu, k=4, category="activation")] == ["relu"]
    adder = (
        "from pragma.knowledge import kernels\n"
        f"for p in ('elu', 'sigmoid'):\n"
        f"    kernels.add(source=open({str(SUITE)!r} + '/' + p + '.py').read(), name=p + '_run', code='// k',"
        " fmt='kernel', speedup=0.5)\n"
    )
    subprocess.run([sys.executable, "-c", adder], check=True, env=pragma_env(isolated_data_dir), timeout=300)
    names = {r["name"] for r in kernels.query(silu, k=4, category="activation")}
    assert names == {"relu", "elu_run", "sigmoid_run"}


KB_POOL = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs Max Pooling 2D."""
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super(Model, self).__init__()
        self.maxpool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.maxpool(x)

batch_size = 16
channels = 32
height = 128
width = 128

def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]

def get_init_inputs():
    return [2, 2, 1, 3]
'''


def test_a_problem_whose_docstring_names_no_category_is_shown_only_kernels_of_its_named_category(monkeypatch):
    """Ablation transcripts (2026-11-28): KernelBench problems name no category in their docstrings, so
    the memory's nearest kernel was shown whatever its category: the streaming-store ReLU for a max pool
    and for a 1-D convolution, advice the profiler's own knowledge contradicted."""
    from pragma.nodes import coder

    seen = _spy(monkeypatch, {"coder": {"1": "```cpp\n// none\n```"}})
    ctx = resolve_context(coder_model="scripted:x", kernel_memory_shared=False, kernel_memory_tokens=5000)
    for name in ("level1/42_Max_Pooling_2D", "level1/67_conv_standard_1D", "level1/94_MSELoss"):
        state = {"problem": {"name": name, "source": KB_POOL, "inputs": []}, "iteration": 0}
        coder.coder(state, SimpleNamespace(context=ctx))
    pool, conv, loss = seen
    # pooling/reduction: the shipped sum reduction (category 'reduction') is of its category, the ReLU is not
    assert 'name="sum_reduction"' in pool and 'name="relu"' not in pool
    # a convolution and an 'others' problem: no shipped kernel of theirs, so none at all
    assert "<verified_kernels" not in conv and "<verified_kernels" not in loss
