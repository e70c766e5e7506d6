"""GPU hardware spec: nominal peaks from device properties, checked against published figures."""

import pytest
import torch

from pragma.tools import gpu_spec

# Device properties as torch + Triton's driver report them (clocks in kHz, bus width in bits).
H100_SXM = {
    "name": "NVIDIA H100 80GB HBM3",
    "major": 9,
    "minor": 0,
    "multi_processor_count": 132,
    "sm_clock_rate": 1980000,
    "mem_clock_rate": 2619000,
    "mem_bus_width": 5120,
    "L2_cache_size": 50 * 2**20,
    "total_memory": 80 * 2**30,
    "shared_memory_per_block_optin": 232448,
    "regs_per_multiprocessor": 65536,
    "max_threads_per_multi_processor": 2048,
    "warp_size": 32,
}
A100_40GB = {
    "name": "NVIDIA A100-SXM4-40GB",
    "major": 8,
    "minor": 0,
    "multiprocessor_count": 108,
    "sm_clock_rate": 1410000,
    "mem_clock_rate": 1215000,
    "mem_bus_width": 5120,
    "L2_cache_size": 40 * 2**20,
}


def test_h100_peaks_match_the_datasheet():
    spec = gpu_spec.spec_from_properties(H100_SXM)
    assert spec["status"] == "ok" and spec["sm_count"] == 132 and spec["compute_capability"] == "9.0"
    assert spec["peak_gbs"] == pytest.approx(3350, rel=0.01)  # HBM3, 3.35 TB/s
    peaks = spec["peak_tflops"]
    assert peaks["fp32"] == pytest.approx(67, rel=0.01)
    assert peaks["fp16"] == pytest.approx(989, rel=0.09)  # datasheet dense figure at 1.83 GHz boost
    assert peaks["bf16"] == peaks["fp16"] and peaks["tf32"] == pytest.approx(peaks["fp16"] / 2)
    assert peaks["fp8"] == pytest.approx(2 * peaks["fp16"])
    assert "132 SMs" in gpu_spec.render_spec(spec) and "L2 50 MiB" in gpu_spec.render_spec(spec)


def test_a100_peaks_match_the_datasheet():
    spec = gpu_spec.spec_from_properties(A100_40GB)
    assert spec["peak_gbs"] == pytest.approx(1555, rel=0.01)
    assert spec["peak_tflops"]["fp16"] == pytest.approx(312, rel=0.01)
    assert spec["peak_tflops"]["fp32"] == pytest.approx(19.5, rel=0.01)
    assert spec["peak_tflops"]["tf32"] == pytest.approx(156, rel=0.01)
    assert "fp8" not in spec["peak_tflops"]  # Ampere has no fp8 tensor cores


def test_compute_roof_picks_tensor_cores_only_for_matrix_work_in_tensor_dtypes():
    spec = gpu_spec.spec_from_properties(H100_SXM)
    fp32 = gpu_spec.compute_peak_gflops(spec, "fp32")
    assert gpu_spec.compute_peak_gflops(spec, "fp16") == fp32  # elementwise fp16 runs on the fp32 pipes
    assert gpu_spec.compute_peak_gflops(spec, "fp16", uses_tensor_cores=True) == pytest.approx(
        1e3 * spec["peak_tflops"]["fp16"]
    )
    assert gpu_spec.compute_peak_gflops(spec, "fp32", uses_tensor_cores=True) == pytest.approx(
        1e3 * spec["peak_tflops"]["tf32"]
    )
    assert gpu_spec.dtype_key(torch.bfloat16) == "bf16" and gpu_spec.dtype_key("float32") == "fp32"


def test_unknown_architecture_says_what_it_does_not_know():
    spec = gpu_spec.spec_from_properties(
        {"name": "future GPU", "major": 13, "minor": 0, "multi_processor_count": 200, "sm_clock_rate": 2000000}
    )
    assert spec["peak_tflops"] == {} and spec["peak_gbs"] == 0.0
    assert any("peak FLOP/s unknown" in n for n in spec["notes"]) and any(
        "bandwidth unknown" in n for n in spec["notes"]
    )
    assert "unknown" in gpu_spec.render_spec(spec)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA (test_gpu_device.py covers it)")
def test_device_spec_without_cuda_is_unavailable():
    spec = gpu_spec.device_spec()
    assert spec["status"] == "unavailable" and "CUDA" in spec["reason"]
    assert gpu_spec.render_spec(spec).startswith("GPU: unavailable")
