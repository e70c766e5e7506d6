"""CPU profiler: parsers on captured tool output, and real profiles that must tell kernels apart."""

from pathlib import Path

import pytest
from conftest import CANDIDATES, EXAMPLES

from pragma.graph.context import resolve_context
from pragma.tools.profilers import diff, instruction_mix, perf_stat, vectorization
from pragma.tools.profilers.cpu import profile_candidate, render_profile

DATA = Path(__file__).parent / "data" / "profiles"


def test_perf_parser_marks_not_supported_as_unavailable_not_zero():
    metrics = perf_stat.parse((DATA / "perf_stat_no_counters.csv").read_text())
    assert metrics["task-clock"] == {"value": 142.59, "unit": "msec", "source": "perf stat (kernel region)"}
    assert metrics["page-faults"]["value"] == 9383
    assert metrics["cycles"]["status"] == "unavailable" and "value" not in metrics["cycles"]
    assert "ipc" not in metrics and not perf_stat.has_hardware_counters(metrics)


def test_perf_parser_derives_ipc_when_counters_exist():
    text = "1000000,,cycles,1,100.00,,\n2500000,,instructions,1,100.00,2.50,insn per cycle\n"
    metrics = perf_stat.parse(text)
    assert metrics["ipc"]["value"] == pytest.approx(2.5) and perf_stat.has_hardware_counters(metrics)


def test_vectorization_report_keeps_only_kernel_lines():
    text = ("/b/k_1.cpp:4:22: optimized: loop vectorized using 64 byte vectors\n"
            "/b/k_1.cpp:9:5: missed: couldn't vectorize loop\n"
            "/b/k_1.cpp:9:5: missed: not vectorized: complicated access pattern.\n"
            "/usr/include/c++/12/bits/stl_algo.h:88:3: optimized: loop vectorized using 32 byte vectors\n")
    report = vectorization.parse(text, "/b/k_1.cpp")
    assert [r["line"] for r in report["loops"]] == [4, 9]
    assert report["vectorized_loops"] == 1 and report["missed_loops"] == 1 and report["max_vector_bytes"] == 64
    assert "complicated access pattern" in vectorization.render(report)


def test_instruction_mix_counts_widths_fma_and_skips_plt():
    text = ("0000000000001100 <relu_forward>:\n"
            "    1100:\tvmaxps %zmm1,%zmm0,%zmm2\n"
            "    1106:\tvfmadd231ps %ymm1,%ymm2,%ymm3\n"
            "    110c:\tmaxss %xmm1,%xmm0\n"
            "    1110:\tret\n"
            "0000000000001020 <memset@plt>:\n"
            "    1020:\tvmaxps %zmm1,%zmm0,%zmm2\n")
    mix = instruction_mix.parse(text)
    assert mix["packed_fp_512"] == 1 and mix["packed_fp_256"] == 1 and mix["fma"] == 1
    assert mix["scalar_fp"] == 1 and mix["instructions"] == 4 and mix["functions"] == ["relu_forward"]


def test_diff_reports_relative_change():
    best = {"metrics": {"per_call_ms": {"value": 2.0, "unit": "ms"}}, "bottleneck": "not-vectorized"}
    cur = {"metrics": {"per_call_ms": {"value": 1.0, "unit": "ms", "source": "wall"}}, "bottleneck": "unknown"}
    rows = diff.diff_profiles(best, cur)
    assert rows[0]["delta_pct"] == pytest.approx(-50.0)
    table = diff.render_diff(rows, best, cur)
    assert "-50.0%" in table and "not-vectorized" in table


def test_real_profiles_tell_vectorized_from_scalar_kernels(isolated_data_dir):
    ctx = resolve_context()
    problem = str(EXAMPLES / "relu.py")
    fast = profile_candidate(problem, (CANDIDATES / "relu_fast.py").read_text(), ctx)
    slow = profile_candidate(problem, (CANDIDATES / "relu_slow.py").read_text(), ctx)
    assert fast["status"] == slow["status"] == "ok", (fast, slow)
    assert fast["metrics"]["packed_fp"]["value"] > 0 and fast["metrics"]["widest_vector_bits"]["value"] >= 256
    assert slow["metrics"]["packed_fp"]["value"] == 0
    assert fast["vectorization"]["vectorized_loops"] >= 1
    assert slow["metrics"]["per_call_ms"]["value"] > fast["metrics"]["per_call_ms"]["value"]
    assert slow["bottleneck"] == "not-vectorized"
    assert fast["confidence"] in ("static", "hardware-counters")
    for metric in fast["metrics"].values():
        assert metric["source"]  # every metric says where it came from
    assert "confidence" in render_profile(fast)


def test_profile_cli_json_survives_an_event_perf_rejects(isolated_data_dir):
    import json
    import subprocess
    import sys

    from conftest import pragma_env

    proc = subprocess.run([sys.executable, "-m", "pragma.graph.cli", "profile", str(EXAMPLES / "relu.py"),
                           str(CANDIDATES / "relu_fast.py"), "--json", "--events", "no_such_event_xyz"],
                          env=pragma_env(isolated_data_dir), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    profile = json.loads(proc.stdout)
    assert {"sources", "confidence", "metrics", "bottleneck", "notes"} <= set(profile)
    if perf_stat.perf_binary():
        assert any("perf stat could not run" in n for n in profile["notes"])
    assert profile["metrics"]["per_call_ms"]["value"] > 0
