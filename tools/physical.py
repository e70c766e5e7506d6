"""Physical plausibility of a timing: the memory-traffic lower bound at the machine's bandwidth.

Any implementation of the operator must read its inputs and write its outputs at least once, so
``traffic_bytes / bandwidth`` is a lower bound on its time. The bandwidth is measured, not
assumed: a copy of a buffer the size of the problem's working set (so a working set that fits in
the last-level cache is compared with cache bandwidth, not DRAM), cached per machine and size.
If the profiler's measured peaks (``hardware.measured_peaks``) exist, the larger figure is used,
and so is the reference's own implied bandwidth: the bound must never call PyTorch impossible.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from typing import Any

import numpy as np

from pragma.graph.context import data_dir
from pragma.tools import hardware

log = logging.getLogger(__name__)

SLACK = 1.5  # measured copies are not the hardware peak; only clearly impossible times are flagged
_MIN_BYTES, _MAX_BYTES = 1 << 20, 1 << 28  # above 256 MiB, first-touch costs seconds


def _bucket(working_set_bytes: int) -> int:
    """Power of two at or above the working set, within [1 MiB, 256 MiB]."""
    size = max(_MIN_BYTES, min(_MAX_BYTES, int(working_set_bytes)))
    return 1 << (size - 1).bit_length()


def _measure_copy_bytes_per_s(working_set_bytes: int, repeats: int = 5) -> float:
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


@functools.lru_cache(maxsize=32)
def copy_bandwidth_bytes_per_s(working_set_bytes: int) -> float:
    """Measured single-thread copy bandwidth for this working-set size; cached on disk per machine."""
    size = _bucket(working_set_bytes)
    path = data_dir() / "machine" / "bandwidth.json"
    model = hardware.cpu_spec()["model"]
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    key = f"{model}|{size}"
    if isinstance(cache.get(key), (int, float)) and cache[key] > 0:
        return float(cache[key])
    value = _measure_copy_bytes_per_s(size)
    cache[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache, indent=1))
    except OSError:
        pass
    return value


def plausibility(traffic_bytes: int, runtime_min_ms: float, ref_runtime_min_ms: float,
                 num_threads: int) -> dict[str, Any]:
    """Check entry for ``speedup_plausible`` plus the figures behind it."""
    if traffic_bytes <= 0 or runtime_min_ms <= 0:
        return {"rule": "speedup_plausible", "verdict": "skip", "detail": "no tensor traffic to bound",
                "is_suspicious": False, "bandwidth_bytes_per_s": 0.0, "min_time_bound_ms": 0.0}
    measured = copy_bandwidth_bytes_per_s(traffic_bytes)
    ref_implied = traffic_bytes / (ref_runtime_min_ms / 1e3) if ref_runtime_min_ms > 0 else 0.0
    bandwidth = max(measured * max(1, num_threads), _profiler_peak_bytes_per_s(), ref_implied)
    bound_ms = traffic_bytes / (bandwidth * SLACK) * 1e3
    implied = traffic_bytes / (runtime_min_ms / 1e3)
    suspicious = runtime_min_ms < bound_ms
    detail = (f"{traffic_bytes} bytes in {runtime_min_ms:.4g} ms = {implied / 1e9:.1f} GB/s; bound "
              f"{bandwidth / 1e9:.1f} GB/s x {SLACK} slack -> at least {bound_ms:.4g} ms")
    return {"rule": "speedup_plausible", "verdict": "warn" if suspicious else "pass",
            "detail": ("faster than memory traffic allows: " if suspicious else "") + detail,
            "is_suspicious": suspicious, "bandwidth_bytes_per_s": bandwidth, "min_time_bound_ms": bound_ms}
