"""Physical plausibility of a timing: the memory-traffic lower bound at the machine's bandwidth.

Any implementation of the operator must read its inputs and write its outputs at least once, so
``traffic_bytes / bandwidth`` is a lower bound on its time. The bandwidth is measured, not
assumed: a copy of a buffer the size of the problem's working set (so a working set that fits in
the last-level cache is compared with cache bandwidth, not DRAM), cached per machine and size.
The bound uses the largest evidence available: that copy, the profiler's measured peak
(``hardware.measured_peaks``) and the reference's fastest call; the cache keeps the largest figure
ever seen, so one measurement on a busy machine cannot make the bound too strict for good.
The candidate's median time is compared (its minimum is too noisy on a loaded machine: six runs
of one kernel spread +-28% in the ratio of minimums), with 2x slack: only clearly impossible
times are flagged.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np

from pragma.graph.context import data_dir
from pragma.tools import hardware

log = logging.getLogger(__name__)

SLACK = 2.0  # measured copies are not the hardware peak; only clearly impossible times are flagged
_MIN_BYTES, _MAX_BYTES = 1 << 20, 1 << 28  # above 256 MiB, first-touch costs seconds


def _bucket(working_set_bytes: int) -> int:
    """Power of two at or above the working set, within [1 MiB, 256 MiB]."""
    size = max(_MIN_BYTES, min(_MAX_BYTES, int(working_set_bytes)))
    return 1 << (size - 1).bit_length()


def _measure_copy_bytes_per_s(working_set_bytes: int, repeats: int = 20) -> float:
    half = max(1, working_set_bytes // 2 // 8)
    src = np.ones(half, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # first touch: page faults are not bandwidth
    best_s = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best_s = min(best_s, time.perf_counter() - t0)
    return 2 * src.nbytes / best_s if best_s > 0 else 0.0  # read + write


def _profiler_peak_bytes_per_s() -> float:
    """The profiler's measured memory bandwidth, if its module provides one (else 0)."""
    peaks_fn = getattr(hardware, "measured_peaks", None)
    if not callable(peaks_fn):
        return 0.0
    try:
        peaks = peaks_fn() or {}
    except Exception as exc:  # their measurement failing must not fail verification
        log.debug("measured_peaks failed: %s", exc)
        return 0.0
    for key, value in peaks.items():
        if "bandwidth" in key and isinstance(value, (int, float)) and value > 0:
            return float(value) * (1e9 if key.endswith(("gbps", "gb_s", "gbytes_per_s")) else 1.0)
    return 0.0


def _cache_path():
    return data_dir() / "machine" / "bandwidth.json"


def _cache_key(working_set_bytes: int) -> str:
    return f"{hardware.cpu_spec()['model']}|{_bucket(working_set_bytes)}"


def _read_cache() -> dict[str, float]:
    try:
        return json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}


def _remember(working_set_bytes: int, bytes_per_s: float) -> None:
    """Keep the largest bandwidth ever seen for this size (load only ever makes figures smaller)."""
    cache = _read_cache()
    key = _cache_key(working_set_bytes)
    if bytes_per_s <= float(cache.get(key, 0.0)):
        return
    cache[key] = bytes_per_s
    try:
        _cache_path().parent.mkdir(parents=True, exist_ok=True)
        _cache_path().write_text(json.dumps(cache, indent=1))
    except OSError:
        pass


def copy_bandwidth_bytes_per_s(working_set_bytes: int) -> float:
    """Single-thread copy bandwidth for this working-set size; measured once, cached per machine."""
    cached = float(_read_cache().get(_cache_key(working_set_bytes), 0.0))
    if cached > 0:
        return cached
    value = _measure_copy_bytes_per_s(_bucket(working_set_bytes))
    _remember(working_set_bytes, value)
    return value


def plausibility(traffic_bytes: int, runtime_ms: float, ref_runtime_min_ms: float, num_threads: int) -> dict[str, Any]:
    """Check entry for ``speedup_plausible`` plus the figures behind it (``runtime_ms``: the
    candidate's median)."""
    if traffic_bytes <= 0 or runtime_ms <= 0:
        return {
            "rule": "speedup_plausible",
            "verdict": "skip",
            "detail": "no tensor traffic to bound",
            "is_suspicious": False,
            "bandwidth_bytes_per_s": 0.0,
            "min_time_bound_ms": 0.0,
        }
    measured = copy_bandwidth_bytes_per_s(traffic_bytes)
    ref_implied = traffic_bytes / (ref_runtime_min_ms / 1e3) if ref_runtime_min_ms > 0 else 0.0
    if num_threads == 1:
        _remember(traffic_bytes, ref_implied)  # the reference proved this much is achievable
    bandwidth = max(measured * max(1, num_threads), _profiler_peak_bytes_per_s(), ref_implied)
    bound_ms = traffic_bytes / (bandwidth * SLACK) * 1e3
    implied = traffic_bytes / (runtime_ms / 1e3)
    suspicious = runtime_ms < bound_ms
    detail = (
        f"{traffic_bytes} bytes in {runtime_ms:.4g} ms (median) = {implied / 1e9:.1f} GB/s; bound "
        f"{bandwidth / 1e9:.1f} GB/s x {SLACK} slack -> at least {bound_ms:.4g} ms"
    )
    return {
        "rule": "speedup_plausible",
        "verdict": "warn" if suspicious else "pass",
        "detail": ("faster than memory traffic allows: " if suspicious else "") + detail,
        "is_suspicious": suspicious,
        "bandwidth_bytes_per_s": bandwidth,
        "min_time_bound_ms": bound_ms,
    }


# --- the compute roof -------------------------------------------------------------------------

FMA_PORTS = 2  # FMA units per core on the x86 server cores we run on (Zen3/Zen4, Skylake-SP and later)


def _max_ghz() -> float:
    """Highest clock the OS reports (sysfs max frequency, else /proc/cpuinfo's current MHz x 1.5)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            return int(f.read().strip()) / 1e6
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            mhz = [float(ln.split(":")[1]) for ln in f if ln.startswith("cpu MHz")]
        return max(mhz) / 1e3 * 1.5 if mhz else 5.0
    except (OSError, ValueError, IndexError):
        return 5.0


def peak_flops_per_s(num_threads: int) -> tuple[float, str]:
    """An upper bound on fp32 FLOP/s at ``num_threads``: the larger of the nominal peak (lanes x FMA
    x ports x clock) and the profiler's measured one; and where it came from."""
    spec = hardware.cpu_spec()
    threads = max(1, min(num_threads, int(spec.get("cores", 1))))
    lanes = max(1, int(spec.get("vector_bits", 128)) // 32)
    nominal = threads * lanes * (2 if spec.get("has_fma") else 1) * FMA_PORTS * _max_ghz() * 1e9
    measured = 0.0
    peak = hardware.cached_peaks(spec)
    if peak:
        measured = hardware.peaks_for_threads(peak, threads)[0] * 1e9
    if measured > nominal:
        return measured, f"measured {measured / 1e9:.0f} GFLOP/s at {threads} thread(s)"
    return (
        nominal,
        f"nominal {nominal / 1e9:.0f} GFLOP/s ({threads} thread(s) x {lanes} lanes x FMA x {FMA_PORTS} ports)",
    )


def compute_bound(flops: int, runtime_ms: float, num_threads: int) -> dict[str, Any] | None:
    """The compute roof: the reference's FLOPs (counted once per verification by the judge) at the
    machine's peak, with ``SLACK``. None when the operator has no counted FLOPs (pointwise ops:
    torch's counter covers matmul/conv-like ops only, so the count is a lower bound)."""
    if flops <= 0 or runtime_ms <= 0:
        return None
    peak, source = peak_flops_per_s(num_threads)
    bound_ms = flops / (peak * SLACK) * 1e3
    achieved = flops / (runtime_ms / 1e3)
    suspicious = runtime_ms < bound_ms
    detail = (
        f"{'faster than the compute roof allows: ' if suspicious else ''}{flops} FLOPs in {runtime_ms:.4g} ms "
        f"(median) = {achieved / 1e9:.1f} GFLOP/s; peak {source} x {SLACK} slack -> at least {bound_ms:.4g} ms"
    )
    return {"is_suspicious": suspicious, "min_time_bound_ms": bound_ms, "detail": detail}
