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


# --- a shared last level measured at sizes it really holds --------------------------------------

VM_SPEC = {  # a 2-core KVM guest on an Intel Xeon: sysfs reports the host's whole L3
    "cores": 2,
    "caches": [
        {"name": "L1d", "level": 1, "type": "Data", "size_bytes": 48 << 10},
        {"name": "L2", "level": 2, "type": "Unified", "size_bytes": 2 << 20},
        {"name": "L3", "level": 3, "type": "Unified", "size_bytes": 260 << 20},
    ],
}


def test_a_shared_level_is_measured_at_halved_sizes_down_to_twice_the_level_below_per_thread():
    levels = hardware.cache_roof_levels(VM_SPEC)
    l3 = levels[-1]
    assert l3["rungs_1t_bytes"] == [130 << 20, 65 << 20, (65 << 20) // 2, (65 << 20) // 4, (65 << 20) // 8]
    assert min(l3["rungs_1t_bytes"]) // VM_SPEC["cores"] >= 2 * (2 << 20)
    assert "rungs_1t_bytes" not in levels[1]  # private levels: one size, as before
    # Every rung reaches the benchmark, in order, split between threads for the all-threads figure.
    args = hardware.bench_args(levels, 2)
    assert args[:2] == [f"{24 << 10}:{24 << 10}", f"{1 << 20}:{1 << 20}"]
    assert args[2:] == [f"{r}:{r // 2}" for r in l3["rungs_1t_bytes"]]


def test_a_vm_level_that_streams_at_half_its_reported_size_holds_the_largest_rung_that_did_not():
    """Figures measured on that VM (GB/s, one thread / both): at 130 MiB its 'L3' read below the DRAM
    triad (20.5 GB/s with streaming stores), so the L3 roof was DRAM's and a streaming-store ReLU
    over 32.8 MB read 130-136% of it."""
    l3 = hardware.cache_roof_levels(VM_SPEC)[-1]
    figures = [(17.6, 53.7), (28.4, 57.0), (28.8, 57.2), (29.1, 58.2), (28.8, 58.3)]
    got = hardware.usable_share(l3, figures)
    assert got["usable_bytes"] == 65 << 20 and got["size_bytes"] == 260 << 20
    assert (got["gbs_1t"], got["gbs_all"]) == (29.1, 58.3)  # the best rung it holds: a roof no kernel beats
    assert [r["gbs_1t"] for r in got["rungs"]] == [f[0] for f in figures]
    peak = {**PEAK, "triad_gbs_1t": 20.5, "triad_gbs_all": 39.8, "levels": [got]}
    roof = hardware.roof_for_working_set(peak, 32.8e6, 1)
    assert roof["level"] == "L3" and roof["roof_gbs"] == 29.1
    assert "usable of 273 MB reported" in roof["why"]
    # Beyond what it holds: the blend of its usable share and DRAM, not of the reported 260 MiB.
    beyond = hardware.roof_for_working_set(peak, 100e6, 1)
    assert beyond["level"] == "DRAM" and 20.5 < beyond["roof_gbs"] < 29.1
    share = (65 << 20) / 100e6
    assert beyond["roof_gbs"] == pytest.approx(1 / ((1 - share) / 20.5 + share / 29.1))


def test_a_level_that_holds_its_half_size_rung_keeps_its_reported_size():
    spec = {**VM_SPEC, "caches": [*VM_SPEC["caches"][:2], {**VM_SPEC["caches"][2], "size_bytes": 32 << 20}]}
    l3 = hardware.cache_roof_levels(spec)[-1]
    assert l3["rungs_1t_bytes"] == [16 << 20, 8 << 20]
    got = hardware.usable_share(l3, [(62.0, 161.0), (66.0, 170.0)])
    assert got["usable_bytes"] == 32 << 20 and got["gbs_1t"] == 66.0
    assert hardware.held_bytes({"name": "L3", "size_bytes": 8, "shared": True}) == 8  # peaks before rungs
    # A level without rungs takes its one figure.
    l2 = hardware.cache_roof_levels(spec)[1]
    assert hardware.usable_share(l2, [(100.0, 200.0)])["gbs_1t"] == 100.0


def test_the_prompts_hardware_line_says_what_a_vm_level_holds():
    """Ablation transcripts (2026-11-28): the Coder's <hardware> line listed sysfs's 'L3 266240 KiB'
    and nothing said the VM holds ~65 MiB of it."""
    l3 = hardware.usable_share(
        hardware.cache_roof_levels(VM_SPEC)[-1], [(17.6, 53.7), (28.4, 57.0)] + [(29.0, 58.0)] * 3
    )
    spec = {"model": "Xeon", "arch": "x86_64", "simd": "avx512", "has_fma": True, "memory_bytes": 24 << 30, **VM_SPEC}
    peak = {**PEAK, "triad_gbs_1t": 20.5, "levels": [l3]}
    text = hardware.render_spec(spec, 1, peak)
    assert "L3 29 GB/s (up to 68.2 MB measured usable of 273 MB reported)" in text
    whole = hardware.usable_share(hardware.cache_roof_levels(VM_SPEC)[-1], [(28.0, 57.0)] * 5)
    assert "reported" not in hardware.render_spec(spec, 1, {**peak, "levels": [whole]})
