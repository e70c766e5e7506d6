"""On a CUDA machine: Triton candidates compiled and timed, the GPU spec from the device, the
runtime side-stream rule, do_bench timing, and Nsight Compute on a real kernel.

Every test here is marked ``gpu`` and skipped (with the reason) where torch sees no CUDA device;
the ncu test also needs ``ncu`` on PATH. Run them with ``pytest -m gpu -s`` to see the numbers.
"""

import pytest
import torch
from test_triton_verify import CANDIDATES, PROBLEMS

from pragma.graph.context import resolve_context
from pragma.tools import backends, gpu_spec
from pragma.tools.profilers import gpu, ncu
from pragma.tools.verify import verify_candidate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch sees none)"),
]
GPU = {"backend": "gpu"}


@pytest.fixture(autouse=True)
def compiled_triton(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # real kernels, not the interpreter


def test_device_spec_reads_the_real_gpu():
    spec = gpu_spec.device_spec()
    print(gpu_spec.render_spec(spec))
    assert spec["status"] == "ok" and spec["sm_count"] > 0 and spec["l2_bytes"] > 0
    assert spec["peak_gbs"] > 100 and spec["peak_tflops"].get("fp32", 0) > 1


def test_l2_flush_buffer_covers_l2():
    from pragma.tools.inside import gpu_timing

    buf = gpu_timing.flush_buffer()
    assert buf.numel() >= 2 * torch.cuda.get_device_properties(0).L2_cache_size


@pytest.mark.parametrize(
    "problem, candidate",
    [
        ("add_relu.py", "add_relu_triton.py"),
        ("row_softmax.py", "softmax_triton.py"),
        ("matmul.py", "matmul_triton.py"),
    ],
)
def test_triton_candidates_verify_on_cuda(problem, candidate):
    result = verify_candidate(str(PROBLEMS / problem), (CANDIDATES / candidate).read_text(), resolve_context(**GPU))
    assert result["status"] == "ok", (result["message"], result["log_tail"][-3000:])
    assert result["device"].startswith("cuda")
    assert next(c for c in result["checks"] if c["rule"] == "no_side_streams")["verdict"] == "pass"


def test_wrong_triton_kernel_is_a_mismatch_on_cuda():
    result = verify_candidate(
        str(PROBLEMS / "row_softmax.py"), (CANDIDATES / "softmax_wrong_mask.py").read_text(), resolve_context(**GPU)
    )
    assert result["status"] == "mismatch", result["message"]


def test_fused_triton_kernel_is_faster_than_pytorch():
    result = verify_candidate(
        str(PROBLEMS / "add_relu_large.py"), (CANDIDATES / "add_relu_triton.py").read_text(), resolve_context(**GPU)
    )
    print(
        f"speedup {result['speedup']:.3f}x (95% CI {result['speedup_ci']}), candidate "
        f"{result['runtime_ms']:.4f} ms, reference {result['ref_runtime_ms']:.4f} ms; {result.get('timing_method')}"
    )
    assert result["status"] == "ok", result["message"]
    assert result["speedup"] > 1.0  # one fused pass (2 reads, 1 write) vs PyTorch's add then relu


def test_side_stream_launch_is_rejected_at_runtime():
    result = verify_candidate(
        str(PROBLEMS / "add_relu.py"),
        (CANDIDATES / "add_relu_side_stream.py").read_text(),
        resolve_context(**GPU, static_checks=False),
    )
    assert result["status"] == "rejected" and result["message"].startswith("rule no_side_streams:"), result["message"]


def test_profile_of_a_real_kernel():
    ctx = resolve_context(**GPU)
    profile = gpu.profile_candidate(
        str(PROBLEMS / "add_relu_large.py"), (CANDIDATES / "add_relu_triton.py").read_text(), ctx
    )
    print(gpu.render_profile(profile))
    assert profile["status"] == "ok", profile
    assert profile["metrics"]["per_call_ms"]["value"] > 0
    if ncu.ncu_binary() is None:
        assert profile["confidence"] == "timing-only" and "not found" in profile["unavailable"]["ncu"]
    elif profile["confidence"] == "timing-only":  # counters not permitted on this machine: say so
        assert "ncu" in profile["unavailable"], profile["unavailable"]
    else:
        assert "gpu__time_duration.sum" in profile["metrics"] and profile["kernels"][0]["name"]
        assert profile["bottleneck"] == "memory-bound"
    assert backends.render_profile(profile).startswith("device:")
