"""CPU profiler, fast part: every parser on checked-in tool output, and the pure functions
(roofline, bottleneck signals, diff, extra-metric validation, cache geometry, operation cost).
The real-kernel profiles are in test_profiler_real.py."""

from pathlib import Path

import pytest

from pragma.tools import hardware
from pragma.tools.profilers import (
    bottleneck,
    callgrind,
    diff,
    extra,
    hotspots,
    instruction_mix,
    perf_stat,
    roofline,
    topdown,
    vectorization,
)
from pragma.tools.profilers.metrics import DEFAULT_CPU_METRICS

DATA = Path(__file__).parent / "data" / "profiles"


# --- perf stat -------------------------------------------------------------------------------


def test_perf_parser_marks_not_supported_as_unavailable_not_zero():
    parsed = perf_stat.parse((DATA / "perf_stat_no_counters.csv").read_text())
    metrics, unavailable, _ = perf_stat.to_metrics(parsed, calls=5, region_ms=700.0)
    assert metrics["task-clock"] == {
        "value": pytest.approx(142.59 / 5),
        "unit": "ms/call",
        "source": "perf stat (kernel region)",
    }
    assert metrics["page-faults"]["value"] == pytest.approx(9383 / 5)
    assert "cycles" not in metrics and unavailable["cycles"] == "perf reports <not supported>"
    assert "ipc" not in metrics and not perf_stat.has_hardware_counters(metrics)
    assert metrics["cpu_utilization"]["value"] == pytest.approx(142.59 / 700.0)


def test_perf_parser_derives_ratios_when_counters_exist():
    text = (
        "1000000,,cycles,1,100.00,,\n2500000,,instructions,1,100.00,2.50,insn per cycle\n"
        "40000,,branches,1,100.00,,\n2000,,branch-misses,1,100.00,5.00,of all branches\n"
    )
    metrics, _, _ = perf_stat.to_metrics(perf_stat.parse(text), calls=10, region_ms=1.0)
    assert metrics["ipc"]["value"] == pytest.approx(2.5) and perf_stat.has_hardware_counters(metrics)
    assert metrics["instructions"]["value"] == 250000 and metrics["instructions"]["unit"] == "count/call"
    assert metrics["branch_miss_pct"]["value"] == pytest.approx(5.0)


def test_topdown_level1_capture_parses_json_metrics_over_shadow_values():
    parsed = perf_stat.parse((DATA / "perf_stat_topdown_l1_doc.csv").read_text())
    # tma_backend_bound (44.3) is the group's metric; the topdown-be-bound shadow value (43.9) loses.
    assert parsed["topdown"] == {
        "retiring": 25.5,
        "backend_bound": 44.3,
        "frontend_bound": 24.3,
        "bad_speculation": 6.0,
    }
    assert "cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/" in parsed["events"]  # commas inside the pmu term
    metrics, unavailable, _ = perf_stat.to_metrics(parsed, 1, 12.8, ["TopdownL1"])
    assert metrics["topdown_backend_bound_pct"] == {
        "value": 44.3,
        "unit": "%",
        "source": "perf stat -M TopdownL1 (kernel region)",
    }
    assert "topdown" not in unavailable
    assert all(name in DEFAULT_CPU_METRICS for name in metrics if name.startswith("topdown_"))


def test_topdown_level2_capture_splits_backend_into_memory_and_core():
    parsed = perf_stat.parse((DATA / "perf_stat_topdown_l2_doc.csv").read_text())
    assert parsed["topdown"]["memory_bound"] == 17.5 and parsed["topdown"]["core_bound"] == 24.9
    assert parsed["topdown"]["backend_bound"] == 42.0  # only the shadow value exists here


def test_perf_parser_handles_newer_padding_hybrid_rows_and_multiplexing():
    text = (
        "# started on ...\n\n"
        "100,,cpu_core/cycles/,10,100.00,,\n50,,cpu_atom/cycles/,10,100.00,,\n"
        "<not counted>,,cpu_atom/instructions/,0,0.00,,\n300,,cpu_core/instructions/,10,100.00,,\n"
        "5000,,TOPDOWN.SLOTS,10,40.00,30.0,%  tma_retiring\n,,,,,20.0,%  tma_frontend_bound\n"
        ",,,,,10.0,%  backend_bound_memory\n"
    )
    parsed = perf_stat.parse(text)
    assert parsed["events"]["cycles"]["value"] == 150  # both core types summed
    assert parsed["events"]["instructions"]["value"] == 300  # <not counted> on one type only
    assert parsed["topdown"] == {"retiring": 30.0, "frontend_bound": 20.0, "memory_bound": 10.0}
    _, _, notes = perf_stat.to_metrics(parsed, 1, 1.0)
    assert any("multiplexed" in n and "TOPDOWN.SLOTS 40%" in n for n in notes)


def test_topdown_names_and_groups():
    assert topdown.normalize("%  tma_bad_speculation") == "bad_speculation"
    assert topdown.normalize("Frontend Bound") == "frontend_bound"
    assert topdown.normalize("%  backend_bound_cpu") == "core_bound"  # AMD Zen PipelineL2
    assert topdown.normalize("insn per cycle") is None
    assert topdown.pick_groups({"TopdownL1", "TopdownL2", "Cache"}) == ["TopdownL1", "TopdownL2"]
    assert topdown.pick_groups({"PipelineL1"}) == ["PipelineL1"] and topdown.pick_groups(set()) == []


def test_perf_command_counts_only_the_region_and_adds_metric_groups():
    cmd = perf_stat.command_prefix("/r/ctl", "/r/ack", "/r/out.csv", ["cycles", "task-clock"], ["TopdownL1"])
    assert cmd[1:3] == ["stat", "-x,"] and ["-D", "-1"] == cmd[5:7]  # counters start disabled
    assert "fifo:/r/ctl,/r/ack" in cmd and cmd[-3:] == ["-M", "TopdownL1", "--"]


# --- callgrind -------------------------------------------------------------------------------


def test_callgrind_parser_reads_totals_and_names_from_real_capture():
    parsed = callgrind.parse((DATA / "callgrind_ffi_kernel.out").read_text())
    assert parsed["events"][:3] == ["Ir", "Dr", "Dw"]
    assert parsed["totals"]["Ir"] == 1574394 and parsed["totals"]["D1mr"] == 131093  # not the broken summary:
    names = {f["name"] for f in parsed["functions"]}
    assert "ffi_call" in names  # defined as "cfn=(16) ffi_call", then referenced as "fn=(16)"
    metrics, notes = callgrind.to_metrics(parsed, calls=2, line_bytes=64, min_bytes=8.0 * 2**20)
    assert not notes
    assert metrics["sim_instructions"]["value"] == pytest.approx(1574394 / 2)
    assert metrics["sim_d1_misses"]["value"] == pytest.approx((131093 + 131079) / 2)
    # 2^20 floats in and out: one L1 fill per 64-byte line of compulsory traffic
    assert metrics["sim_d1_traffic_ratio"]["value"] == pytest.approx(1.0, rel=0.01)
    assert metrics["sim_branch_mispredict_pct"]["value"] < 0.1
    assert all(name in DEFAULT_CPU_METRICS and m["unit"] for name, m in metrics.items())


def test_callgrind_reports_nothing_rather_than_zeros_when_nothing_was_collected():
    metrics, notes = callgrind.to_metrics({"events": ["Ir"], "totals": {"Ir": 0.0}, "functions": []}, 2, 64, 1.0)
    assert metrics == {} and notes


def test_cache_geometry_is_explicit_and_rounded_to_power_of_two_sets():
    caches = [  # this VM's sysfs: the L3 has 212992 sets, which valgrind cannot simulate
        {"name": "L1d", "level": 1, "type": "Data", "size_bytes": 49152, "ways": 12, "line_bytes": 64, "sets": 64},
        {
            "name": "L1i",
            "level": 1,
            "type": "Instruction",
            "size_bytes": 32768,
            "ways": 8,
            "line_bytes": 64,
            "sets": 64,
        },
        {
            "name": "L2",
            "level": 2,
            "type": "Unified",
            "size_bytes": 2 * 2**20,
            "ways": 16,
            "line_bytes": 64,
            "sets": 2048,
        },
        {
            "name": "L3",
            "level": 3,
            "type": "Unified",
            "size_bytes": 266240 * 1024,
            "ways": 20,
            "line_bytes": 64,
            "sets": 212992,
        },
    ]
    flags, used, notes = callgrind.geometry(caches)
    assert flags == ["--I1=32768,8,64", "--D1=49152,12,64", "--LL=167772160,20,64"]
    assert used["LL"]["from"] == "L3" and any("212992 sets" in n for n in notes)
    cmd = callgrind.command_prefix("/r/cg.out", flags, has_helper=True, toggles=callgrind.entry_toggles(["cext"]))
    assert "--instr-atstart=no" in cmd and "--collect-atstart=no" in cmd and "--toggle-collect=ffi_call" in cmd
    assert "--cache-sim=yes" in cmd and "--branch-sim=yes" in cmd and "--LL=167772160,20,64" in cmd


# --- hot spots, static evidence --------------------------------------------------------------


def test_hotspot_parser_on_real_perf_report():
    parsed = hotspots.parse((DATA / "perf_report_hotspots.txt").read_text())
    assert parsed["samples"] == 3541  # event count / sample period, not the rounded "3K"
    assert parsed["rows"][0] == {"pct": 86.61, "dso": "k2.so", "symbol": "scale2"}
    assert hotspots.kernel_share(parsed, ["/cache/k2.so"])["kernel_samples_pct"]["value"] == 86.61
    assert "87% scale2 [k2.so]" in hotspots.render(parsed)


def test_vectorization_report_on_real_gcc_output():
    report = vectorization.parse(
        (DATA / "gcc_vec_report_kernel.txt").read_text(), str(DATA / "gcc_vec_report_kernel.cpp")
    )
    by_line = {r["line"]: r for r in report["loops"]}
    assert by_line[5]["vectorized"] and by_line[5]["versioned_for_alias"] and by_line[5]["vector_bytes"] == 64
    assert by_line[9]["vectorized"] and not by_line[9]["versioned_for_alias"]
    assert not by_line[13]["vectorized"]
    assert any("nextafterf" in why and "cmath" in why for why in by_line[13]["missed"])  # header reason kept
    assert report["vectorized_loops"] == 2 and report["missed_loops"] == 1
    assert "versioned for aliasing" in vectorization.render(report)


def test_instruction_mix_on_real_objdump_of_vector_and_scalar_builds():
    vec = instruction_mix.parse((DATA / "objdump_scale_shift_vector.txt").read_text())
    sca = instruction_mix.parse((DATA / "objdump_scale_shift_scalar.txt").read_text())
    assert vec["widest_vector_bits"] == 512 and vec["packed_fp_512"] == 1 and vec["fma"] >= 2
    assert sca["widest_vector_bits"] == 0 and sca["packed_fp"] == 0 and sca["scalar_fp"] == 1
    assert vec["functions"] == sca["functions"] == ["scale_shift"]  # .plt is not kernel code


# --- extra metrics ---------------------------------------------------------------------------


def test_extra_metrics_are_validated_and_routed():
    names = extra.split_names(
        "dTLB-load-misses,cpu/event=0x3c,umask=0x0/,TopdownL2,sim_d1_misses,"
        "kernel_samples_pct,cycles,--output=/etc/x,rm -rf /,tma_memory_bound"
    )
    req = extra.resolve(names, default_events=tuple(perf_stat.default_events()))
    assert req.events == ["dTLB-load-misses", "cpu/event=0x3c,umask=0x0/"]
    assert req.metric_groups == ["TopdownL2", "tma_memory_bound"]
    assert req.force_simulation and req.force_hotspots
    assert set(req.already_default) == {"sim_d1_misses", "kernel_samples_pct", "cycles"}
    assert set(req.rejected) == {"--output=/etc/x", "rm -rf /"}


# --- roofline and bottleneck -----------------------------------------------------------------

PEAK = {
    "status": "ok",
    "fma_gflops_1t": 100.0,
    "fma_gflops_all": 180.0,
    "triad_gbs_1t": 10.0,
    "triad_gbs_all": 15.0,
    "cores": 2,
}


def test_roofline_sides_and_percentages():
    relu = roofline.compute({"flops": 1e6, "min_bytes": 8e6}, per_call_ms=1.6, peak=PEAK, num_threads=1)
    assert relu["bound_by"] == "memory" and relu["ridge_flop_per_byte"] == pytest.approx(10.0)
    assert relu["achieved_gbs"] == pytest.approx(5.0) and relu["roofline_pct"] == pytest.approx(50.0)
    gemm = roofline.compute({"flops": 2e9, "min_bytes": 8e6}, per_call_ms=40.0, peak=PEAK, num_threads=1)
    assert gemm["bound_by"] == "compute" and gemm["roofline_pct"] == pytest.approx(50.0)
    assert roofline.compute(None, 1.0, PEAK, 1)["status"] == "unavailable"
    assert (
        roofline.compute({"flops": 1.0, "min_bytes": 1.0}, 1.0, {"status": "unavailable", "reason": "x"}, 1)["status"]
        == "unavailable"
    )
    assert hardware.peaks_for_threads(PEAK, 2) == (180.0, 15.0)


def _m(**values):
    return {k: {"value": v, "unit": "", "source": "test"} for k, v in values.items()}


def test_bottleneck_signals_pick_the_strongest_evidence():
    mem = roofline.compute({"flops": 1e6, "min_bytes": 8e6}, 1.6, PEAK, 1)
    cmp_ = roofline.compute({"flops": 2e9, "min_bytes": 8e6}, 40.0, PEAK, 1)
    vec_mix = {"packed_fp": 4, "scalar_fp": 2}
    assert bottleneck.classify_cpu(_m(per_call_ms=0.01), None, None)[0] == "latency/overhead-bound"
    assert bottleneck.classify_cpu(_m(per_call_ms=1.6), None, vec_mix, mem)[0] == "memory-bound"
    assert bottleneck.classify_cpu(_m(per_call_ms=40.0), None, vec_mix, cmp_)[0] == "compute-bound"
    strided = _m(per_call_ms=1.6, sim_d1_traffic_ratio=16.0)
    assert bottleneck.classify_cpu(strided, None, {"packed_fp": 0, "scalar_fp": 3}, mem)[0] == "poor-locality"
    assert (
        bottleneck.classify_cpu(_m(per_call_ms=40.0), None, {"packed_fp": 0, "scalar_fp": 3}, cmp_)[0]
        == "not-vectorized"
    )
    topdown_bad = _m(per_call_ms=5.0, topdown_bad_speculation_pct=35.0)
    assert bottleneck.classify_cpu(topdown_bad, None, vec_mix, mem)[0] == "bad-speculation"
    td_mem = _m(per_call_ms=5.0, topdown_memory_bound_pct=40.0, topdown_core_bound_pct=10.0)
    assert bottleneck.classify_cpu(td_mem, None, vec_mix, None)[0] == "memory-bound"
    slow_mem = roofline.compute({"flops": 1e6, "min_bytes": 8e6}, 8.0, PEAK, 1)  # 10% of the DRAM roof
    labels = [lab for lab, _ in bottleneck.signals_cpu(strided, slow_mem, None, {"packed_fp": 0, "scalar_fp": 3})]
    assert labels[:2] == ["poor-locality", "not-vectorized"] and set(labels) <= set(bottleneck.VOCABULARY)


# --- diff ------------------------------------------------------------------------------------


def test_diff_lists_only_what_moved_with_direction_and_bounded_size():
    best = {
        "metrics": {
            "per_call_ms": {"value": 2.0, "unit": "ms", "source": "wall"},
            "sim_d1_misses": {"value": 1000.0, "unit": "count/call", "source": "cg"},
            "sim_d1_miss_pct": {"value": 30.0, "unit": "%", "source": "cg"},
            "task-clock": {"value": 1.0, "unit": "ms/call", "source": "perf"},
        },
        "bottleneck": "poor-locality",
        "confidence": "simulation",
    }
    cur = {
        "metrics": {
            "per_call_ms": {"value": 1.0, "unit": "ms", "source": "wall"},
            "sim_d1_misses": {"value": 1020.0, "unit": "count/call", "source": "cg"},
            "sim_d1_miss_pct": {"value": 6.0, "unit": "%", "source": "cg"},
            "widest_vector_bits": {"value": 512.0, "unit": "bits", "source": "objdump"},
            "task-clock": {"value": 0.5, "unit": "ms/call", "source": "perf"},
        },
        "bottleneck": "memory-bound",
        "confidence": "simulation",
    }
    d = diff.diff_profiles(best, cur)
    moved = {r["metric"]: r for r in d["rows"]}
    assert list(moved)[0] == "per_call_ms" and moved["per_call_ms"]["change"] == pytest.approx(-50.0)
    assert moved["per_call_ms"]["verdict"] == "better"
    assert (
        moved["sim_d1_miss_pct"]["change"] == pytest.approx(-24.0) and moved["sim_d1_miss_pct"]["change_unit"] == "pp"
    )
    assert "sim_d1_misses" not in moved and d["unchanged"] == ["sim_d1_misses"]  # +2% is noise
    assert d["new"] == ["widest_vector_bits"]
    table = diff.render_diff(d, best_iteration=3)
    assert "-50.0%" in table and "-24.0pp" in table and "poor-locality -> memory-bound" in table
    assert "iteration 3" in table and "sim_d1_misses |" not in table
    many = {"metrics": {f"m{i}": {"value": float(i + 1), "unit": "count", "source": "s"} for i in range(40)}}
    more = {"metrics": {f"m{i}": {"value": float(i + 1) * 3, "unit": "count", "source": "s"} for i in range(40)}}
    d2 = diff.diff_profiles(many, more)
    assert len(d2["rows"]) == diff.MAX_ROWS and d2["more_moved"] == 40 - diff.MAX_ROWS
    assert diff.render_diff(diff.diff_profiles(None, cur)).startswith("no historical best")


# --- operation cost (FLOPs and bytes of the reference) -----------------------------------------


def test_operation_cost_counts_matmul_flops_exactly_and_estimates_elementwise(tmp_path):
    import importlib.util

    import torch

    from pragma.tools.inside.region import operation_cost

    src = tmp_path / "prob.py"
    src.write_text(
        "import torch\nfrom torch import nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.w = nn.Linear(64, 32)\n"
        "    def forward(self, x):\n        return torch.relu(self.w(x))\n"
        "def get_inputs():\n    return [torch.randn(16, 64)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    spec = importlib.util.spec_from_file_location("prob_for_cost", src)
    prob = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prob)
    cost = operation_cost(prob, 0, [torch.randn(16, 64)])
    assert cost["flops_by_op"]["addmm"] == 2 * 16 * 64 * 32  # torch's formula
    assert cost["flops_by_op"]["relu"] == 16 * 32  # one per output element (estimate)
    assert cost["flops_method"] == "mixed"
    # input + weight + bias read once, output written once, fp32
    assert cost["min_bytes"] == 4 * (16 * 64 + 64 * 32 + 32 + 16 * 32)


def test_simulated_branch_mispredictions_need_a_higher_rate_than_counters():
    # callgrind's predictor misses short loop exits: 9% simulated is loop structure, not data
    loops = _m(per_call_ms=5.0, sim_branch_mispredict_pct=9.0, sim_branches=24e6, sim_instructions=325e6)
    assert "bad-speculation" not in [lab for lab, _ in bottleneck.signals_cpu(loops, None, None, None)]
    data_dependent = _m(per_call_ms=5.0, sim_branch_mispredict_pct=40.0, sim_branches=1e6, sim_instructions=8e6)
    assert bottleneck.classify_cpu(data_dependent, None, None)[0] == "bad-speculation"
    counters = _m(per_call_ms=5.0, branch_miss_pct=9.0, branches=1e6, instructions=8e6)
    assert bottleneck.classify_cpu(counters, None, None)[0] == "bad-speculation"


@pytest.mark.integration
def test_simulated_region_fits_its_calls_to_the_time_budget(tmp_path):
    import time

    from pragma.tools.inside.region import _simulate

    helper, why = callgrind.helper_library(tmp_path)
    if helper is None:
        pytest.skip(why)
    calls = []  # outside valgrind the client requests are no-ops: only the budgeting runs
    fast = _simulate(
        {"callgrind_helper": helper, "callgrind_budget_s": 60.0, "profile_calls": 3}, lambda: calls.append(1)
    )
    assert fast["sim_calls"] == 3 and fast["sim_warm_caches"] and len(calls) == 4  # warm call + 3 counted
    slow = _simulate(
        {"callgrind_helper": helper, "callgrind_budget_s": 0.1, "profile_calls": 3}, lambda: time.sleep(0.08)
    )
    assert slow["sim_calls"] == 1 and not slow["sim_warm_caches"]  # the warm call is the measurement


def test_diff_from_zero_stays_json_native():
    import json

    best = {"metrics": {"packed_fp": {"value": 0.0, "unit": "static count", "source": "objdump"}}}
    cur = {"metrics": {"packed_fp": {"value": 4.0, "unit": "static count", "source": "objdump"}}}
    d = diff.diff_profiles(best, cur)
    assert d["rows"][0]["change"] is None and d["rows"][0]["verdict"] == "better"
    json.loads(json.dumps(d, allow_nan=False))
    assert "from 0" in diff.render_diff(d)


def test_every_topdown_key_the_parser_can_emit_is_in_the_catalog():
    for key in topdown.LEVEL1 + topdown.LEVEL2:
        assert topdown.metric_name(key) in DEFAULT_CPU_METRICS
    assert all(
        spec.unit and spec.meaning and spec.better in ("lower", "higher", "") for spec in DEFAULT_CPU_METRICS.values()
    )


# Figures of this 2-core EPYC VM's measured peaks (tools/hardware.py, PEAKS_VERSION 3), rounded.
LEVEL_PEAK = {
    **PEAK,
    "triad_gbs_1t": 22.0,
    "triad_gbs_all": 47.0,
    "levels": [
        {"name": "L1d", "size_bytes": 32768, "shared": False, "gbs_1t": 146.0, "gbs_all": 292.0},
        {"name": "L2", "size_bytes": 524288, "shared": False, "gbs_1t": 100.0, "gbs_all": 194.0},
        {"name": "L3", "size_bytes": 33554432, "shared": True, "gbs_1t": 48.0, "gbs_all": 125.0},
    ],
}


def test_roof_is_the_level_the_working_set_fits():
    # issue 13's max-pool: 2.35 MB per call at 22 GB/s reads 100% of DRAM but ~46% of the L3 roof.
    pool = roofline.compute({"flops": 0.3e6, "min_bytes": 2.35e6}, 2.35e6 / 22e9 * 1e3, LEVEL_PEAK, 1)
    assert pool["roof_level"] == "L3" and pool["roof_gbs"] == 48.0
    assert 40 < pool["bandwidth_pct"] < 50 and "fits L3" in roofline.render(pool)
    assert "46% of the L3 roof" in roofline.render(pool)
    label, why = bottleneck.classify_cpu(_m(per_call_ms=0.11), None, {"packed_fp": 4}, pool)
    assert label == "cache-resident" and "far from that roof" in why
    big = roofline.compute({"flops": 8e6, "min_bytes": 64e6}, 64e6 / 21e9 * 1e3, LEVEL_PEAK, 1)
    label, why = bottleneck.classify_cpu(_m(per_call_ms=3.0), None, {"packed_fp": 4}, big)
    assert big["roof_level"] == "DRAM" and label == "dram-bound" and "far from" not in why
    # Private levels hold their size per thread: 600 kB fits L2 with 2 threads, not with 1.
    assert hardware.roof_for_working_set(LEVEL_PEAK, 600e3, 1)["level"] == "L3"
    two = hardware.roof_for_working_set(LEVEL_PEAK, 600e3, 2)
    assert two["level"] == "L2" and two["roof_gbs"] == 194.0
    tiny = hardware.roof_for_working_set(LEVEL_PEAK, 8e3, 1)
    assert tiny["level"] == "L1d" and tiny["roof_gbs"] == 146.0
    # Peaks without levels (measured before PEAKS_VERSION 3) keep the DRAM roof and the old label.
    old = roofline.compute({"flops": 0.3e6, "min_bytes": 2.35e6}, 0.1, PEAK, 1)
    assert "roof_level" not in old and old["roof_gbs"] == 10.0


# --- llvm-mca, valgrind's failure reason, callgrind on demand -----------------------------------


def test_mca_parser_reads_throughput_pressure_and_bottleneck_from_real_capture():
    from pragma.tools.profilers import mca

    out = mca.parse((DATA / "llvm_mca_dependency_chain.txt").read_text())
    # 100 iterations of 4 instructions in 310 cycles: the vaddps chain (latency 3) sets the pace.
    assert out["cycles_per_iteration"] == pytest.approx(3.1) and out["ipc"] == pytest.approx(1.29)
    assert out["instructions_per_iteration"] == 4.0 and out["dispatch_width"] == 6.0
    assert out["bottleneck"].startswith("data dependencies") and "24%" in out["bottleneck"]
    assert out["busiest_resource"].startswith("Zn3") and 0 < out["port_pressure_pct"] < 50
    metrics = mca.to_metrics({"status": "ok", **out})
    assert set(metrics) == {"mca_cycles_per_iteration", "mca_ipc", "mca_port_pressure_pct"}
    assert all(name in DEFAULT_CPU_METRICS for name in metrics)


def test_mca_picks_the_vector_main_loop_of_a_real_avx512_disassembly():
    from pragma.tools.profilers import mca

    # objdump of scale_shift_vector built with -march=native on an AVX-512 (Zen4) machine.
    loops = mca.find_loops((DATA / "objdump_scale_shift_vector.txt").read_text())
    loop = mca.pick_hot_loop(loops, ["scale_shift"])
    assert len([lp for lp in loops if lp["innermost"]]) >= 2  # main body and remainder loop(s)
    assert mca._vector_bits(loop["body"]) == 512 and any("vfmadd" in t for t in loop["body"])
    asm = mca.to_asm(loop)
    assert asm.startswith(".Lloop:") and asm.rstrip().endswith(".Lloop") and "<" not in asm


def test_callgrind_failure_names_valgrinds_reason_not_its_summary_line():
    text = (DATA / "callgrind_avx512_sigill.txt").read_text()
    assert text.rstrip().splitlines()[-1].startswith("==")  # the old report: the output's last line
    reason = callgrind.failure_reason(text)
    assert reason.startswith("valgrind cannot execute an instruction") and "0x62" in reason  # EVEX prefix
    assert callgrind.failure_reason("==2== Mispred rate: 0.0%\n==2== I refs: 12") is None


def test_cheap_evidence_ambiguity_decides_whether_callgrind_runs():
    vec = {"packed_fp": 4, "scalar_fp": 0}
    far = roofline.compute({"flops": 1e6, "min_bytes": 64e6}, 64e6 / 4e9 * 1e3, LEVEL_PEAK, 1)  # 18% of DRAM
    near = roofline.compute({"flops": 1e6, "min_bytes": 64e6}, 64e6 / 20e9 * 1e3, LEVEL_PEAK, 1)
    assert "access pattern unknown" in bottleneck.ambiguity(_m(per_call_ms=16.0), far, None, vec)
    assert bottleneck.ambiguity(_m(per_call_ms=3.2), near, None, vec) == ""
    assert bottleneck.ambiguity(_m(per_call_ms=16.0), far, None, {"packed_fp": 0, "scalar_fp": 3}) == ""
    assert bottleneck.ambiguity(_m(per_call_ms=0.01), far, None, vec) == ""  # overhead explains it
    assert bottleneck.ambiguity(_m(per_call_ms=1.0), {"status": "unavailable"}, None, vec) == "no roofline"


def test_a_scalar_kernel_far_below_any_streaming_rate_is_ambiguous():
    scalar = {"packed_fp": 0, "scalar_fp": 3}
    crawl = roofline.compute({"flops": 1e6, "min_bytes": 4e6}, 4e6 / 0.5e9 * 1e3, LEVEL_PEAK, 1)  # 1% of L3
    assert "access pattern unknown" in bottleneck.ambiguity(_m(per_call_ms=8.0), crawl, None, scalar)


def test_poor_locality_fires_on_cache_resident_and_dram_sides_too():
    strided = _m(per_call_ms=8.0, sim_d1_traffic_ratio=16.0)
    for ws in (4e6, 64e6):  # fits L3 / exceeds it
        roof = roofline.compute({"flops": 1e6, "min_bytes": ws}, ws / 0.5e9 * 1e3, LEVEL_PEAK, 1)
        labels = [lab for lab, _ in bottleneck.signals_cpu(strided, roof, None, {"packed_fp": 0, "scalar_fp": 3})]
        assert labels[0] == "poor-locality", labels


def test_the_hot_function_is_matched_across_perf_and_objdump_spellings():
    """Ablation transcripts (max pooling): perf named ``pool_sp<4, 1>`` hot while llvm-mca analysed
    ``void pool_sp<8, 4>(...)``, an instantiation the problem never ran."""
    from pragma.tools.profilers import mca

    def loop(function: str, body: list[str]) -> dict:
        return {"function": function, "start": 0, "end": 1, "body": body, "innermost": True}

    wide = ["vmaxps %zmm1,%zmm2,%zmm3", "vmaxps %zmm4,%zmm5,%zmm6", "add $0x40,%rax", "jne 0"]
    narrow = ["vmaxps %zmm1,%zmm2,%zmm3", "jne 0"]
    loops = [
        loop("void pool_sp<8, 4>(float const*, float*, long)", wide),
        loop("void pool_sp<4, 1>(float const*, float*, long)", narrow),
        loop("pragma_kernel", wide),
    ]
    assert mca.pick_hot_loop(loops, ["pool_sp<4, 1>"])["function"].startswith("void pool_sp<4, 1>")
    assert mca.pick_hot_loop(loops, ["void pool_sp<4,1>(float const*, float*, long)"])["function"].startswith(
        "void pool_sp<4, 1>"
    )
    assert mca.function_key("std::vector<int, std::allocator<int> >::size() const") == (
        "std::vector<int,std::allocator<int>>::size"
    )
    assert mca.pick_hot_loop(loops, ["pragma_kernel"])["function"] == "pragma_kernel"


def test_a_short_call_spent_in_the_kernel_is_not_called_overhead_bound():
    """Ablation transcripts (max pooling): 45 us per call with 75% of perf's samples in the kernel
    was labelled "call overhead dominates"; a share from a handful of samples is no evidence."""
    short = {"per_call_ms": 0.045}
    assert bottleneck.signals_cpu(_m(**short), None, None, None)[0][0] == "latency/overhead-bound"
    in_kernel = _m(**short, kernel_samples_pct=75.0)
    assert all(label != "latency/overhead-bound" for label, _ in bottleneck.signals_cpu(in_kernel, None, None, None))
    assert bottleneck.signals_cpu(_m(**short, kernel_samples_pct=20.0), None, None, None)[0][0] == (
        "latency/overhead-bound"
    )
    few = {"samples": 8, "rows": [{"pct": 75.0, "dso": "k2.so", "symbol": "pool"}]}
    assert hotspots.kernel_share(few, ["/cache/k2.so"]) == {}
    enough = {**few, "samples": 400}
    assert hotspots.kernel_share(enough, ["/cache/k2.so"])["kernel_samples_pct"]["value"] == 75.0


def test_a_loop_picked_by_perfs_spelling_says_perf_picked_it(monkeypatch):
    """analyse's picked_by uses the same name match as pick_hot_loop: objdump -C writes a template's
    return type and arguments, perf neither."""
    from pragma.tools.profilers import mca

    text = (DATA / "objdump_scale_shift_vector.txt").read_text()
    text = text.replace("<scale_shift>:", "<void scale_shift<4>(float const*, float*, long)>:")
    monkeypatch.setattr(mca, "collect", lambda asm: {"status": "ok", "text": "", "mcpu": "znver4", "note": ""})
    monkeypatch.setattr(mca, "parse", lambda text: {})
    found = mca.analyse(text, ["scale_shift<4>"])
    assert found["function"].startswith("void scale_shift<4>(")
    assert found["picked_by"] == "widest innermost loop of the hottest kernel function (perf record)"
