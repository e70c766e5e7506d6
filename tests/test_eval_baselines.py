"""Reference timing and the torch.compile baseline: measured in the sandbox, cached per machine,
and an honest "unavailable: reason" where torch.compile cannot work."""

from pathlib import Path

import pytest

from pragma.eval import baselines
from pragma.eval.db import ResultsDB
from pragma.eval.job import TORCH_COMPILE, JobSpec, run_job
from pragma.eval.suites import load_suite
from pragma.graph.context import resolve_context

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

PROBLEM = '''"""category: activation — a small fused elementwise op, cheap to compile."""
import torch
from torch import nn

n = 262147


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def small_problem(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "fused.py").write_text(PROBLEM)
    [problem] = load_suite(tmp_path / "suite")
    return problem


def test_reference_timing_is_cached_per_machine(small_problem):
    ctx = resolve_context()
    first = baselines.reference_timing(small_problem.path, small_problem.sha256, ctx)
    assert first["status"] == "ok" and first["ref_ms"] > 0 and not first["cached"]
    again = baselines.reference_timing(small_problem.path, small_problem.sha256, ctx)
    assert again["cached"] and again["ref_ms"] == first["ref_ms"]
    # Another thread count, or an edited problem (another hash), is another measurement.
    assert baselines.cached(small_problem.sha256, ctx.num_threads + 1, baselines.REFERENCE_KIND) is None


@pytest.mark.integration
def test_torch_compile_is_measured_in_the_sandbox_and_cached(small_problem):
    ctx = resolve_context(timed_calls=10)
    result = baselines.torch_compile_baseline(small_problem.path, small_problem.sha256, ctx)
    assert result["status"] == "ok", result
    assert result["speedup"] > 0 and result["eager_ms"] > 0 and result["compiled_ms"] > 0
    low, high = result["speedup_ci"]
    assert 0 < low <= high
    again = baselines.torch_compile_baseline(small_problem.path, small_problem.sha256, ctx)
    assert again["cached"] and again["speedup"] == result["speedup"]


@pytest.mark.integration
def test_torch_compile_without_a_compiler_is_unavailable_with_the_reason(small_problem, monkeypatch, tmp_path):
    # Inductor builds C++ for CPU kernels with $CXX: without one, torch.compile cannot work here.
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    db_path = tmp_path / "results.sqlite"
    spec = JobSpec(
        run_id="tc",
        problem=small_problem.to_dict(),
        mode=TORCH_COMPILE,
        context={k: v for k, v in vars(resolve_context()).items() if k != "agent_mode"},
        results_url=str(db_path),
        checkpoint_url=str(tmp_path / "cp.sqlite"),
        out_dir=str(tmp_path),
    )
    assert run_job(spec) == "finished"
    [row] = ResultsDB(str(db_path)).problems("tc")
    assert not row["solved"] and row["message"].startswith("unavailable: torch.compile failed")
    cached = baselines.cached(small_problem.sha256, 1, "torch.compile")
    assert cached["status"] == "unavailable" and Path(small_problem.path).exists()
