"""Machine spec: cache geometry from sysfs, the peaks cache and its summary for prompts."""

import json

import pytest

from pragma.tools import hardware

PEAK = {
    "status": "ok",
    "fma_gflops_1t": 160.0,
    "fma_gflops_all": 300.0,
    "triad_gbs_1t": 12.0,
    "triad_gbs_all": 20.0,
    "cores": 2,
    "load_avg_1min": 0.5,
}


def test_cache_levels_read_from_sysfs(tmp_path):
    for idx, (level, kind, size, ways) in enumerate([(1, "Data", "48K", 12), (2, "Unified", "2048K", 16)]):
        d = tmp_path / f"index{idx}"
        d.mkdir()
        for name, value in (
            ("level", level),
            ("type", kind),
            ("size", size),
            ("ways_of_associativity", ways),
            ("coherency_line_size", 64),
        ):
            (d / name).write_text(f"{value}\n")
    levels = hardware.cache_levels(tmp_path)
    assert [(c["name"], c["size_bytes"], c["sets"]) for c in levels] == [("L1d", 49152, 64), ("L2", 2**21, 2048)]


def test_spec_of_this_machine_names_simd_and_caches():
    spec = hardware.cpu_spec()
    assert spec["cores"] >= 1 and spec["simd"] and spec["memory_bytes"] > 0
    assert spec["vector_bits"] in (64, 128, 256, 512)
    text = hardware.render_spec(spec, 1)
    assert spec["simd"] in text and "1 thread(s)" in text


def test_cached_peaks_feed_the_summary_the_roofline_and_the_verifier(isolated_data_dir):
    from pragma.tools.judging import physical

    spec = hardware.cpu_spec()
    assert hardware.cached_peaks(spec) is None and hardware.measured_peaks() == {}
    assert hardware.peaks(measure=False)["status"] == "unavailable"
    path = isolated_data_dir / "hardware" / f"peaks_{hardware.machine_key(spec)}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**PEAK, "cores": spec["cores"]}))
    assert hardware.peaks(measure=False)["fma_gflops_1t"] == 160.0  # served from the cache
    assert "160.0 GFLOP/s" in hardware.render_spec(spec, 1) and "ridge point 13.3" in hardware.render_spec(spec, 1)
    assert hardware.measured_peaks()["memory_bandwidth_gbps"] == 20.0
    assert physical._profiler_peak_bytes_per_s() == pytest.approx(20e9)
    busy = {**PEAK, "cores": spec["cores"], "load_avg_1min": spec["cores"] + 4.0}
    assert "may understate" in hardware.render_spec(spec, 1, busy)


def test_peaks_scale_flops_with_threads_and_saturate_bandwidth():
    assert hardware.peaks_for_threads(PEAK, 1) == (160.0, 12.0)
    assert hardware.peaks_for_threads(PEAK, 2) == (300.0, 20.0)
    assert hardware.peaks_for_threads(PEAK, 8) == (300.0, 20.0)  # no more cores than the machine has
    assert hardware.peaks_for_threads({**PEAK, "fma_gflops_all": 100.0}, 2)[0] == 160.0  # never below 1 thread


@pytest.mark.integration
def test_peak_benchmark_measures_this_machine(isolated_data_dir):
    peak = hardware.measure_peaks()
    assert peak["status"] == "ok", peak
    assert peak["fma_gflops_1t"] > 1.0 and peak["triad_gbs_1t"] > 0.5
    assert peak["vector_bytes"] in (16, 32, 64)
