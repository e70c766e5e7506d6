"""Nsight Compute parser, renderer, bottleneck and diff on checked-in data.

The CSV and log fixtures in data/gpu/ncu/ are HAND-WRITTEN (no GPU was available to capture real
ncu output): they follow ncu's documented raw-page CSV layout and messages, say so in their first
lines, and carry plausible H100 values. test_gpu_device.py checks the parser on real output.
"""

import copy
import json
import threading
from pathlib import Path

import pytest

from pragma.tools import backends, gpu_spec
from pragma.tools.profilers import diff, gpu, ncu
from pragma.tools.profilers.bottleneck import VOCABULARY
from pragma.tools.profilers.metrics import DEFAULT_GPU_METRICS

DATA = Path(__file__).parent / "data" / "gpu" / "ncu"
H100 = gpu_spec.spec_from_properties(
    {
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
    }
)
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def parsed(name: str) -> dict:
    return ncu.parse((DATA / name).read_text())


def profile(name: str, op_cost: dict | None = None, per_call_ms: float = 0.0, dtype: str = "float32") -> dict:
    p = parsed(name)
    kernel_us = sum(la["metrics"]["gpu__time_duration.sum"]["value"] for la in p["launches"]) / 2
    region = {
        "status": "ok",
        "calls": 2,
        "per_call_ms": per_call_ms or 1.1 * kernel_us / 1e3,
        "op_cost": op_cost,
        "dtype": dtype,
        "device": H100["name"],
    }
    return gpu.assemble(region, H100, parsed=p, notes=[], tools={}, unavailable={})


ADD_RELU_COST = {
    "flops": 8388608.0,
    "min_bytes": 50331648.0,
    "flops_method": "estimate",
    "flops_by_op": {"add": 4194304, "relu": 4194304},
}
MATMUL_COST = {
    "flops": 2147483648.0,
    "min_bytes": 12582912.0,
    "flops_method": "formula",
    "flops_by_op": {"mm": 2147483648},
}


def test_parser_reads_the_raw_page_layout():
    p = parsed("add_relu_raw.csv")
    assert [la["kernel"] for la in p["launches"]] == ["add_relu_kernel", "add_relu_kernel"]
    first = p["launches"][0]
    assert first["grid"] == "(4096, 1, 1)" and first["block"] == "(128, 1, 1)" and first["cc"] == "9.0"
    assert first["metrics"]["gpu__time_duration.sum"] == {"value": pytest.approx(19.52), "unit": "us"}  # ns -> us
    assert first["metrics"]["dram__bytes.sum"] == {"value": 50462720.0, "unit": "bytes"}  # "50,462,720"
    assert first["metrics"]["launch__registers_per_thread"]["unit"] == "register/thread"
    assert set(p["metric_names"]) == set(ncu.DEFAULT_METRICS)  # the fixture holds exactly the default set
    assert ncu.parse("==PROF== nothing here\n")["error"]


def test_number_and_unit_conversion():
    assert ncu.number("1,048,576") == 1048576.0 and ncu.number("n/a") is None and ncu.number("") is None
    assert ncu.convert(2.5, "msecond") == (2500.0, "us") and ncu.convert(3.0, "Mbyte") == (3e6, "bytes")
    assert ncu.convert(7.0, "%") == (7.0, "%")


def test_metrics_per_call_sum_times_weight_percentages_and_take_launch_figures_of_the_main_kernel():
    metrics, unavailable = ncu.to_metrics(parsed("softmax_two_kernels_raw.csv"), calls=2)
    # two kernels per call: 15.872 + 17.056 us
    assert metrics["gpu__time_duration.sum"]["value"] == pytest.approx(15.872 + 17.056)
    assert metrics["gpu__time_duration.sum"]["unit"] == "us/call"
    assert metrics["dram__bytes.sum"]["value"] == pytest.approx(16515072 + 32768000)
    dram = metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"]["value"]
    assert dram == pytest.approx((31.2 * 15.872 + 38.9 * 17.056) / (15.872 + 17.056))  # time-weighted
    # the hmma pipe was n/a on every launch: unavailable with a reason, never a fake 0
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" in unavailable
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" not in metrics
    table = ncu.kernels(parsed("softmax_two_kernels_raw.csv"), calls=2)
    assert [k["name"] for k in table] == ["softmax_normalize_kernel", "softmax_stats_kernel"]
    assert sum(k["share_pct"] for k in table) == pytest.approx(100.0)
    assert all(k["launches_per_call"] == 1.0 for k in table)
    for name, m in metrics.items():
        assert m["source"] == ncu.SOURCE and m["unit"] == DEFAULT_GPU_METRICS[name].unit


def test_bottlenecks_use_the_shared_vocabulary():
    add = profile("add_relu_raw.csv", ADD_RELU_COST)
    assert add["bottleneck"] == "memory-bound" and "memory speed of light 85%" in add["bottleneck_evidence"]
    mm = profile("matmul_raw.csv", MATMUL_COST)
    assert mm["bottleneck"] == "compute-bound"
    labels = [s["label"] for s in mm["signals"]]
    assert "not-vectorized" in labels  # a matrix product with the tensor pipe idle
    soft = profile("softmax_two_kernels_raw.csv")
    assert soft["bottleneck"] == "latency/overhead-bound" and "long_scoreboard" in soft["bottleneck_evidence"]
    for p in (add, mm, soft):
        assert p["confidence"] == "hardware-counters" and p["backend"] == "gpu"
        assert {s["label"] for s in p["signals"]} <= set(VOCABULARY)
    slow_calls = profile("add_relu_raw.csv", ADD_RELU_COST, per_call_ms=0.2)  # 19.5 us of kernels in 200 us
    assert slow_calls["bottleneck"] == "latency/overhead-bound" and "launch" in slow_calls["bottleneck_evidence"]


def test_roofline_against_nominal_h100_peaks():
    add = profile("add_relu_raw.csv", ADD_RELU_COST)
    roof = add["roofline"]
    assert roof["status"] == "ok" and roof["bound_by"] == "memory"
    assert roof["peak_gbs"] == pytest.approx(3352.3, rel=1e-3)
    assert roof["compute_roof"] == "fp32 CUDA cores" and roof["peak_gflops"] == pytest.approx(66908, rel=1e-3)
    assert 50 < roof["roofline_pct"] < 100  # 50 MB in ~21.5 us ~ 2.3 TB/s of 3.35
    half = gpu.roofline(MATMUL_COST, 0.1, H100, "float16")
    assert half["compute_roof"] == "fp16 tensor cores" and half["peak_gflops"] == pytest.approx(1070530, rel=1e-3)
    assert gpu.roofline(None, 1.0, H100, "float32")["status"] == "unavailable"


def test_render_names_sources_kernels_stalls_and_the_limiter():
    text = gpu.render_profile(profile("matmul_raw.csv", MATMUL_COST))
    assert "confidence: hardware-counters" in text and "bottleneck: compute-bound" in text
    assert "limited by registers (3 blocks/SM)" in text and "168 registers/thread" in text
    assert "| matmul_kernel |" in text and "short_scoreboard 3.24" in text and "roofline:" in text
    assert "ncu metrics: " in text and "gpu__time_duration.sum" in text
    assert backends.render_profile(profile("add_relu_raw.csv")) == gpu.render_profile(profile("add_relu_raw.csv"))


def test_profile_diff_is_the_cpu_one_with_gpu_directions():
    best = profile("matmul_raw.csv", MATMUL_COST)
    tuned = copy.deepcopy(parsed("matmul_raw.csv"))
    for launch in tuned["launches"]:  # the next candidate: fewer registers, twice the occupancy, 35% faster
        m = launch["metrics"]
        m["gpu__time_duration.sum"]["value"] *= 0.65
        m["launch__registers_per_thread"]["value"] = 96
        m["sm__warps_active.avg.pct_of_peak_sustained_active"]["value"] = 35.1
        m[STALL.format("short_scoreboard")]["value"] = 1.2
    region = {"status": "ok", "calls": 2, "per_call_ms": 0.085, "op_cost": MATMUL_COST, "device": H100["name"]}
    current = gpu.assemble(region, H100, parsed=tuned, notes=[], tools={}, unavailable={})
    delta = diff.diff_profiles(best, current)
    rows = {r["metric"]: r for r in delta["rows"]}
    assert rows["gpu__time_duration.sum"]["verdict"] == "better" and rows["gpu__time_duration.sum"]["change"] < -30
    assert rows["sm__warps_active.avg.pct_of_peak_sustained_active"]["verdict"] == "better"
    assert rows[STALL.format("short_scoreboard")]["verdict"] == "better"
    assert rows["launch__registers_per_thread"]["verdict"] == ""  # neither direction is better by itself
    table = diff.render_diff(delta, 3)
    assert "gpu__time_duration.sum" in table and "historical best (iteration 3)" in table


def test_torch_profiler_fallback_is_timing_only():
    region = json.loads((DATA / "torch_profiler_region.json").read_text())
    p = gpu.assemble(
        region,
        H100,
        parsed=None,
        notes=["Nsight Compute unavailable (ERR_NVGPUCTRPERM ...)"],
        tools={},
        unavailable={"ncu": "ERR_NVGPUCTRPERM: ..."},
    )
    assert p["confidence"] == "timing-only" and gpu.TORCH_SOURCE in p["sources"]
    assert p["metrics"]["torch_profiler_kernel_ms"]["value"] == pytest.approx(0.0341)
    assert p["bottleneck"] == "latency/overhead-bound"  # 34 us of kernels in a 91 us call
    text = gpu.render_profile(p)
    assert "torch.profiler" in text and "softmax_normalize_kernel" in text and "ERR_NVGPUCTRPERM" in text


@pytest.mark.parametrize(
    "log, kind", [("ncu_errperm.log", "counters_not_permitted"), ("ncu_no_kernels.log", "no_kernels")]
)
def test_log_diagnosis(log, kind):
    found = ncu.diagnose_log((DATA / log).read_text())
    assert found["kind"] == kind
    if kind == "counters_not_permitted":
        assert "ERR_NVGPUCTRPERM" in found["reason"] and "NVreg_RestrictProfilingToAdminUsers" in found["reason"]
    assert ncu.diagnose_log("==PROF== Connected to process 1\n==PROF== Disconnected from process 1\n") is None
    unknown = ncu.diagnose_log("==ERROR== Failed to find metric regex:^sm__pipe_tensor_op_gmma_cycles_active\n")
    assert unknown["kind"] == "unknown_metric" and unknown["metrics"] == ["sm__pipe_tensor_op_gmma_cycles_active"]


def test_extra_metrics_are_validated_before_reaching_ncu():
    req = ncu.resolve_extra(
        [
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "gpu__time_duration.sum",
            "--set full",
            "dram__bytes.sum;rm -rf /",
            "occupancy",
        ]
    )
    assert req.metrics == ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
    assert req.already_default == ["gpu__time_duration.sum"]
    assert set(req.rejected) == {"--set full", "dram__bytes.sum;rm -rf /", "occupancy"}
    kept, dropped = ncu.select_metrics(
        ["gpu__time_duration.sum", "sm__pipe_tensor_op_gmma_cycles_active.avg.pct"], frozenset({"gpu__time_duration"})
    )
    assert kept == ["gpu__time_duration.sum"] and dropped == ["sm__pipe_tensor_op_gmma_cycles_active.avg.pct"]
    prefix = ncu.command_prefix("/usr/local/cuda/bin/ncu", kept, Path("/r/report"), Path("/r/ncu.log"))
    joined = " ".join(prefix)
    assert "--profile-from-start off" in joined and "--metrics gpu__time_duration.sum" in joined
    assert "--export /r/report" in joined and "--log-file /r/ncu.log" in joined and "--target-processes all" in joined


def test_one_ncu_run_at_a_time():
    held, release = threading.Event(), threading.Event()

    def holder():
        with ncu.exclusive(5.0):
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(5)
    with pytest.raises(TimeoutError):
        with ncu.exclusive(0.3):
            pass
    release.set()
    t.join()
    with ncu.exclusive(1.0) as waited_s:
        assert waited_s < 1.0
