"""Real Triton candidates through the real verifier, on the CPU under TRITON_INTERPRET=1.

The interpreter runs each program instance in Python (numpy), so the problems are tiny (a few
thousand elements) and timing is cut to a few calls: these tests check correctness, the
anti-cheat rules for Triton and the plumbing (sandbox env, launch counting), not speed.
On a machine with CUDA the same candidates run compiled in test_gpu_device.py.
"""

from pathlib import Path

import pytest
import torch

from pragma.graph.context import resolve_context
from pragma.tools.verify import verify_candidate

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

DATA = Path(__file__).parent / "data" / "gpu"
PROBLEMS, CANDIDATES = DATA / "problems", DATA / "candidates"
INTERPRETER = {"backend": "gpu", "timed_calls": 3, "warmup_calls": 1, "warmup_s": 0.0}

interpreter_only = pytest.mark.skipif(
    torch.cuda.is_available(), reason="CUDA present: test_gpu_device.py runs these candidates compiled"
)


def _check(result: dict, rule: str) -> dict:
    return next(c for c in result["checks"] if c["rule"] == rule)


@interpreter_only
@pytest.mark.parametrize(
    "problem, candidate, status",
    [
        ("add_relu.py", "add_relu_triton.py", "ok"),
        ("row_softmax.py", "softmax_triton.py", "ok"),
        ("matmul.py", "matmul_triton.py", "ok"),
        ("row_softmax.py", "softmax_wrong_mask.py", "mismatch"),
    ],
)
def test_triton_candidates_on_the_interpreter(monkeypatch, problem, candidate, status):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read by the sandbox's env allowlist before triton.jit runs
    ctx = resolve_context(**INTERPRETER)
    result = verify_candidate(str(PROBLEMS / problem), (CANDIDATES / candidate).read_text(), ctx)
    assert result["status"] == status, (result["message"], result["log_tail"][-2000:])
    assert result["device"].startswith("cpu (Triton interpreter)")
    if status == "ok":
        assert result["max_abs_diff"] <= 1e-4
        assert _check(result, "has_compiled_kernel")["verdict"] == "pass"
        assert _check(result, "compiled_code_ran")["verdict"] == "pass"  # Triton launches counted
        # The interpreter's own tensor plumbing (aten.set_, copy_) is not the candidate's compute.
        assert _check(result, "no_torch_compute")["verdict"] == "pass"
        assert result["runtime_ms"] > 0 and result["samples_ms"]["candidate"]
    else:
        # 56 padding lanes of exp(0 - max) in every denominator: far outside 1e-4.
        assert result["max_abs_diff"] > 1e-3 and "elements differ" in result["message"]


@pytest.mark.parametrize(
    "problem, candidate, rule",
    [
        ("add_relu.py", "add_relu_side_stream.py", "no_side_streams"),
        ("matmul.py", "matmul_tf32.py", "no_precision_downgrade"),
    ],
)
def test_triton_cheats_are_rejected_before_running(problem, candidate, rule):
    result = verify_candidate(
        str(PROBLEMS / problem), (CANDIDATES / candidate).read_text(), resolve_context(**INTERPRETER)
    )
    assert result["status"] == "rejected" and result["message"].startswith(f"rule {rule}:")
    assert result["sandbox"] == {"static": "rejected before any code ran"}


def test_triton_kernel_code_is_not_torch_compute():
    """Inside @triton.jit, `a @ b` and tensor methods are Triton ops; outside they stay torch."""
    from pragma.tools.judging.anticheat import first_failure, static_checks

    kernel = (
        "import torch\nimport triton\nimport triton.language as tl\n"
        "@triton.jit\ndef k(a_ptr, o_ptr, BLOCK: tl.constexpr):\n"
        "    x = tl.load(a_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :])\n"
        "    tl.store(o_ptr + tl.arange(0, BLOCK), (x @ x).sum(axis=1))\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def forward(self, a):\n        o = torch.empty(16)\n        k[(1,)](a, o, BLOCK=16)\n"
        "        return o\n"
    )
    assert first_failure(static_checks(kernel, "", "gpu")) is None
    outside = kernel.replace("        return o\n", "        return o @ o\n")
    assert first_failure(static_checks(outside, "", "gpu"))["rule"] == "no_torch_compute"
    assert (
        first_failure(static_checks(kernel.replace("(x @ x)", "x.to(tl.float16)"), "", "gpu"))["rule"]
        == "no_precision_downgrade"
    )
