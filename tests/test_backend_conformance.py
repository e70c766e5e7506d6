"""One specification every backend passes (tools/backends.py: the Backend protocol).

The nodes reach a backend only through ``backend_for(ctx)``: its prompts, hardware summary,
``verify``, ``profile`` and ``render_profile``. Each backend brings a case (a problem, an honest
kernel, a wrong kernel, the settings it runs under on this machine) and the same checks run for
all of them, so a change that breaks the contract on one path fails here even where no GPU runs:
the GPU backend runs its real Triton kernels under ``TRITON_INTERPRET=1`` on the CPU (correctness
and the timing loop's plumbing; its profile must then say it is unavailable, and why).

Both backends share one timing loop, the judge's (tools/judging/judge.py): every timed call of every
implementation is taken by the judge's clock around the runner's round trip, interleaved in rotating
order. The checks below hold it to that on each backend.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from conftest import CANDIDATES, EXAMPLES

from pragma.graph.context import resolve_context
from pragma.tools import backends
from pragma.tools.verify import empty_result

pytestmark = pytest.mark.integration  # real sandboxes, compilers and (on CPU) perf

GPU_DATA = Path(__file__).parent / "data" / "gpu"


@dataclasses.dataclass(frozen=True)
class Case:
    backend: str
    problem: Path
    honest: Path
    wrong: Path
    settings: dict
    env: dict
    kernel_word: str  # what the Coder is told to write, in its system prompt


CASES = [
    Case(
        "cpu",
        EXAMPLES / "relu.py",
        CANDIDATES / "relu_fast.py",
        CANDIDATES / "relu_wrong.py",
        {"timed_calls": 6, "warmup_calls": 1, "warmup_s": 0.0},
        {},
        "C++",
    ),
    Case(
        "gpu",
        GPU_DATA / "problems" / "row_softmax.py",
        GPU_DATA / "candidates" / "softmax_triton.py",
        GPU_DATA / "candidates" / "softmax_wrong_mask.py",
        {"backend": "gpu", "timed_calls": 3, "warmup_calls": 1, "warmup_s": 0.0},
        {} if torch.cuda.is_available() else {"TRITON_INTERPRET": "1"},
        "Triton",
    ),
]


@pytest.fixture(params=CASES, ids=[c.backend for c in CASES])
def case(request, monkeypatch):
    c: Case = request.param
    for k, v in c.env.items():
        monkeypatch.setenv(k, v)
    ctx = resolve_context(**c.settings)
    try:
        backend = backends.require(ctx)
    except backends.BackendUnavailable as exc:
        pytest.skip(f"{c.backend} backend unavailable here: {exc}")
    return c, ctx, backend


def test_the_backend_names_itself_and_describes_the_machine(case):
    c, ctx, backend = case
    assert backend.name == c.backend == ctx.backend
    assert c.kernel_word in backend.coder_system
    assert backend.hardware_summary(ctx).strip()


def test_an_honest_kernel_is_ok_and_timed_by_the_judges_interleaved_loop(case):
    c, ctx, backend = case
    result = backend.verify(str(c.problem), c.honest.read_text(), ctx)
    assert result["status"] == "ok", (result["message"], result["log_tail"][-1500:])
    # The same result contract on every backend: every field of the template, nothing missing.
    assert set(empty_result("ok", "")) <= set(result)
    assert result["max_abs_diff"] <= ctx.atol + ctx.rtol
    # One loop: both implementations timed the same number of times, by the judge's clock.
    samples = result["samples_ms"]
    assert len(samples["reference"]) == len(samples["candidate"]) == ctx.timed_calls
    assert all(ms > 0 for ms in samples["reference"] + samples["candidate"])
    assert "judge's perf_counter_ns around each call's round trip" in result["timing_method"]
    assert result["runtime_ms"] > 0 and result["speedup"] > 0
    assert result["audited_calls"], "no timed call was audited"


def test_a_wrong_kernel_is_a_mismatch_with_its_error(case):
    c, ctx, backend = case
    result = backend.verify(str(c.problem), c.wrong.read_text(), ctx)
    assert result["status"] == "mismatch", result["message"]
    assert result["max_abs_diff"] > ctx.atol and not result["is_new_best"]


def test_the_best_is_timed_next_to_the_candidate_and_a_verdict_given(case):
    c, ctx, backend = case
    code = c.honest.read_text()
    result = backend.verify(str(c.problem), code, ctx, best_code=code, best_speedup=1.0)
    assert result["status"] == "ok", result["message"]
    assert len(result["samples_ms"]["best"]) >= ctx.timed_calls
    low, high = result["speedup_vs_best_ci"]
    assert 0 < low <= high
    assert result["acceptance"].startswith(("accepted", "not accepted"))


def test_the_profile_is_tagged_and_rendered_or_says_why_not(case):
    c, ctx, backend = case
    profile = backend.profile(str(c.problem), c.honest.read_text(), ctx)
    assert profile["status"] in ("ok", "unavailable")
    text = backend.render_profile(profile)
    if profile["status"] == "unavailable":
        assert profile["reason"] and profile["reason"][:40] in text
    else:
        assert profile["backend"] == c.backend and profile.get("bottleneck")
        assert backends.render_profile(profile) == text  # the shared renderer picks this backend
