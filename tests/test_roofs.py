"""Roofs that hold (issue 33, "figures that hold"): no honest kernel exceeds the roof it is compared
with, and a figure above 100% of a roof is named as a measurement problem wherever it is shown.

The demo's profile read a streaming-store ReLU at 169% of the DRAM roof: the triad behind the roof
wrote with ordinary stores (each written line read first, 16 bytes moved for 12 counted), and the
kernel's input stayed in the 32 MiB L3 between profiled calls because its outputs bypassed it. An
ordinary-store ReLU over the same 65.5 MB then read 105% of the DRAM roof: part of its data is in
L3 too, so a working set beyond the last level gets the best-case blend of L3 and DRAM.
"""

import pytest
from conftest import CANDIDATES, EXAMPLES, PROFILER_SETTINGS, unmeasured_cache_roof

from pragma.graph.context import resolve_context
from pragma.nodes.playbook import _roof_line
from pragma.tools import hardware
from pragma.tools.profilers import bottleneck, roofline

# This 2-core EPYC's peaks (PEAKS_VERSION 4, rounded): DRAM roof 26.7 GB/s at one thread (the
# streaming-store triad; the ordinary one read 20.4), L3 62 GB/s.
PEAK = {
    "status": "ok",
    "cores": 2,
    "fma_gflops_1t": 116.0,
    "fma_gflops_all": 232.0,
    "triad_gbs_1t": 26.7,
    "triad_gbs_all": 60.0,
    "levels": [
        {"name": "L1d", "size_bytes": 32768, "shared": False, "gbs_1t": 290.0, "gbs_all": 590.0},
        {"name": "L2", "size_bytes": 1048576, "shared": False, "gbs_1t": 115.0, "gbs_all": 229.0},
        {"name": "L3", "size_bytes": 33554432, "shared": True, "gbs_1t": 62.0, "gbs_all": 161.0},
    ],
}
# examples/relu.py: 1000 x 8191 floats in and out.
RELU_COST = {"flops": 8.191e6, "min_bytes": 65.528e6, "read_bytes": 32.764e6, "write_bytes": 32.764e6}
STREAMING_RELU_MS = 65.528e6 / 45e9 * 1e3  # 45 GB/s: what the streaming ReLU achieved here


def test_a_figure_above_the_roof_is_named_a_measurement_problem_everywhere():
    # Without knowing the kernel streams, its 65.5 MB working set is compared with the DRAM side
    # (the L3/DRAM blend, 37.7 GB/s): 119%.
    roof = roofline.compute(RELU_COST, STREAMING_RELU_MS, PEAK, 1)
    assert roof["roof_level"] == "DRAM" and roof["bandwidth_pct"] > 110
    assert roof["above_roof"].startswith("measurement problem")
    text = roofline.render(roof)
    assert "(above the roof: a measurement problem) of the DRAM roof" in text
    assert f"= {roof['bandwidth_pct']:.0f}% of the DRAM roof" not in text  # never the plain figure
    assert "Measurement problem" in text
    label, evidence = bottleneck.roofline_side(roof)
    assert label == "dram-bound" and "measurement problem" in evidence
    assert "a measurement problem, not a limit reached" in _roof_line({"roofline": roof})


def test_a_figure_within_the_roof_is_plain():
    roof = roofline.compute(RELU_COST, 65.528e6 / 24.6e9 * 1e3, PEAK, 1)  # ordinary stores, 24.6 GB/s
    assert "above_roof" not in roof and 60 < roof["bandwidth_pct"] < 70
    assert "measurement problem" not in roofline.render(roof)
    assert "measurement problem" not in bottleneck.roofline_side(roof)[1]
    assert _roof_line({"roofline": roof}) == f"{roof['roofline_pct']:.0f}% of its bandwidth roof (DRAM)"


def test_a_compute_figure_above_the_peak_is_a_measurement_problem():
    roof = roofline.compute({"flops": 2e9, "min_bytes": 1e6}, 2e9 / 150e9 * 1e3, PEAK, 1)  # 150 > 116 GFLOP/s
    assert roof["bound_by"] == "compute" and roof["roofline_pct"] > 100
    assert "compute roof" in roof["above_roof"] and "measurement problem" in roofline.render(roof)


def test_a_gpu_figure_above_its_nominal_roof_is_a_measurement_problem():
    from test_ncu import H100

    from pragma.tools.profilers import gpu

    cost = {"flops": 12.5e6, "min_bytes": 50e6}  # 50 MB element-wise, H100 nominal 3.35 TB/s
    roof = gpu.roofline(cost, 50e6 / 4.0e12 * 1e3, H100, "float32")  # 4.0 TB/s: above the roof
    assert roof["roofline_pct"] > 100 and "measurement problem" in roof["above_roof"]
    assert "(above the roof: a measurement problem) of attainable" in gpu.render_roofline(roof)
    assert "above_roof" not in gpu.roofline(cost, 50e6 / 2.3e12 * 1e3, H100, "float32")


def test_streaming_stores_put_the_roof_at_the_level_the_inputs_fit():
    roof = roofline.compute(RELU_COST, STREAMING_RELU_MS, PEAK, 1, streaming_store_count=2)
    assert roof["roof_level"] == "L3" and roof["roof_gbs"] == 62.0
    assert "streaming stores" in roof["roof_why"] and "above_roof" not in roof
    assert 65 < roof["bandwidth_pct"] < 80
    # Inputs beyond the last level: DRAM as before, now the streaming triad's figure.
    big = {**RELU_COST, "min_bytes": 2 * 80e6, "read_bytes": 80e6, "write_bytes": 80e6}
    assert roofline.compute(big, 8.0, PEAK, 1, streaming_store_count=2)["roof_level"] == "DRAM"


def test_a_working_set_beyond_the_last_level_gets_the_blend_of_l3_and_dram():
    """An ordinary-store ReLU over 65.5 MB read 24.6 GB/s, 105% of the DRAM triad (23.4 GB/s, load
    4): a 32 MiB L3 still holds up to half of it between calls. The roof is the best case: the last
    level's capacity from the last level, the rest from DRAM; it tends to DRAM's for large sets."""
    relu = hardware.roof_for_working_set(PEAK, 65.528e6, 1)
    expected = 65.528e6 / ((65.528e6 - 33554432) / 26.7 + 33554432 / 62.0)
    assert relu["level"] == "DRAM" and relu["roof_gbs"] == pytest.approx(expected)
    assert 26.7 < relu["roof_gbs"] < 62.0 and "at best 33.6 MB of it from L3" in relu["why"]
    huge = hardware.roof_for_working_set(PEAK, 4e9, 1)
    assert huge["roof_gbs"] < 27.0 and huge["dram_gbs"] == 26.7


def test_streaming_stores_are_counted_in_a_disassembly():
    text = """
0000000000001139 <relu_forward>:
    1139:	vmaxps %zmm1,%zmm0,%zmm0
    1140:	vmovntps %zmm0,(%rsi,%rax,1)
    1147:	vmovups %ymm0,(%rsi)
    114b:	movntdq %xmm0,0x10(%rdi)
    1150:	sfence
"""
    assert roofline.streaming_stores(text) == 2
    assert roofline.streaming_stores("    10:\tvmovaps %ymm0,(%rdi)\n") == 0


@pytest.mark.integration
def test_peaks_take_the_better_of_ordinary_and_streaming_stores(tmp_path, monkeypatch):
    monkeypatch.setenv("PRAGMA_DATA_DIR", str(tmp_path))
    peak = hardware.measure_peaks()
    if peak["status"] != "ok":
        pytest.skip(peak["reason"])
    for threads in ("1t", "all"):
        ordinary, streaming = peak[f"triad_ordinary_gbs_{threads}"], peak[f"triad_streaming_gbs_{threads}"]
        assert peak[f"triad_gbs_{threads}"] == max(ordinary, streaming)
    if hardware.cpu_spec()["arch"] in ("x86_64", "AMD64"):
        assert peak["triad_streaming_gbs_1t"] > 0


@pytest.mark.integration
@pytest.mark.timing
def test_a_real_streaming_store_relu_stays_within_its_roof(monkeypatch):
    """The streaming-store ReLU (nodes/playbook.py's form) profiled for real against this machine's
    measured peaks: at most 110% of its roof. The 10% margin covers peaks and kernel measured at
    different moments of other agents' load; before this change it read 169% (the demo) to 237%
    (load 6) of the DRAM roof. Measured after it: 79% of the L3 roof (load 6.8)."""
    from pragma.tools.profilers.cpu import profile_candidate

    for k, v in PROFILER_SETTINGS.items():
        monkeypatch.setenv(k, v)
    ctx = resolve_context(profile_hotspots=False, profile_simulate="never")
    code = (CANDIDATES / "relu_streaming.py").read_text()
    profile = profile_candidate(str(EXAMPLES / "relu.py"), code, ctx, None)
    assert profile["status"] == "ok", profile
    roof = profile["roofline"]
    assert roof["streaming_stores"] > 0, "objdump found no streaming store in the built kernel"
    share = roof["bandwidth_pct"]
    if share > 110 and (why := unmeasured_cache_roof(roof)):
        # The roof is DRAM's there, and a working set that does sit in the real L3 read 130-136% of it.
        pytest.skip(f"{why}: {share:.0f}% of a roof it could not measure")
    assert share <= 110, f"{share:.0f}% of the {roof['roof_level']} roof: {roofline.render(roof)}"
    if share > roofline.ROOF_PCT:  # inside the margin: still never shown as a plain figure
        assert "measurement problem" in profile["bottleneck_evidence"]


def _roof_of(per_call_ms: float, micro: dict, metrics: dict) -> tuple[dict, list[str]]:
    from pragma.graph.context import resolve_context
    from pragma.tools.profilers import cpu

    notes: list[str] = []
    region = {"per_call_ms": per_call_ms, "op_cost": LAYERNORM_COST, "micro": micro}
    ctx = resolve_context({"num_threads": 1})
    roof = cpu._roofline_part(region, dict(metrics), PEAK, ctx, notes, [], {})
    return roof, notes


# A LayerNorm's minimum bytes and FLOPs (x in and out, weight and bias), small enough that the warm
# calls' bandwidth stays under every roof here.
LAYERNORM_COST = {"flops": 8 * 2.1e6, "min_bytes": 20e6, "read_bytes": 12e6}


def test_counted_calls_far_slower_than_the_warm_ones_do_not_set_the_roofline():
    """Ablation transcripts (2026-11-28): a LayerNorm's counted calls averaged 19.25 ms (task-clock 15.27,
    126 page faults a call) while its warm calls, timed right after in the same process, took 2.12 ms
    and the verifier 2.93 ms; the roofline said 11% of the L3 roof, 'bandwidth is not what limits it'."""
    metrics = {
        "task-clock": {"value": 15.27, "unit": "ms/call", "source": "perf"},
        "page-faults": {"value": 126.0, "unit": "/call", "source": "perf"},
    }
    roof, notes = _roof_of(19.25, {"status": "ok", "warm_ms": 2.12}, metrics)
    assert roof["time_basis"].startswith("warm calls")
    assert roof["achieved_gbs"] == pytest.approx(LAYERNORM_COST["min_bytes"] / 2.12e-3 / 1e9, rel=1e-3)
    assert any("19.2 ms (126 page faults a call), 9.1x the 2.12 ms of warm calls" in n for n in notes), notes
    # Steady counted calls (within 1.5x of the warm ones) keep their own time; no micro, no change.
    steady, quiet = _roof_of(2.5, {"status": "ok", "warm_ms": 2.12}, {})
    assert steady["time_basis"] == "wall clock" and not quiet
    alone, _ = _roof_of(19.25, {"status": "skipped"}, {})
    assert alone["time_basis"] == "wall clock"
