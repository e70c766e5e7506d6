"""Hardware spec of this machine for prompts and the roofline.

Two parts with different costs (delete the cached file to measure again):

- ``cpu_spec()``: what the OS reports (cores, SIMD level, cache geometry, memory); cheap, cached
  per process.
- ``peaks()``: the machine's measured peak FLOP/s (independent FMA chains at the widest vector
  width) and memory bandwidth (STREAM-like triad over arrays several times the last-level cache,
  with ordinary and with streaming stores: the better is the DRAM roof),
  for one thread and for all cores, plus the triad bandwidth per cache level (working sets of half
  of L1d, L2 and L3, from sysfs) so the roofline can use the roof of the level a kernel's data
  lives in. Measured once per machine (a few seconds) and cached as JSON
  in ``data_dir()/hardware/``; ``cached_peaks()`` only reads that file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PEAKS_VERSION = 5  # bump when the benchmark changes, so stale cached figures are re-measured
PEAKS_TIMEOUT_S = 120.0
TRIAD_MIN_ARRAY_BYTES = 32 * 2**20
TRIAD_MAX_ARRAY_BYTES = 256 * 2**20
# A shared last level is also measured at halved sizes, down to twice the level below it (per thread), at most
# this many sizes in all (each costs ~0.3-1 s once per machine); see cache_roof_levels.
SHARED_LEVEL_RUNGS = 6
# A rung still holds its data in the level while it reads at least this share of the smallest
# rung's bandwidth; below it the data streams from DRAM (a VM's 260 MiB L3 read 19 GB/s at
# 130 MiB against 28-29 GB/s at 4-64 MiB, DRAM's ordinary-store triad 14.6).
SHARED_LEVEL_KNEE = 0.8


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def simd_level(flags: set[str]) -> str:
    for flag, name in (
        ("avx512f", "AVX-512"),
        ("avx2", "AVX2"),
        ("avx", "AVX"),
        ("sse4_2", "SSE4.2"),
        ("asimd", "NEON"),
    ):
        if flag in flags:
            return name
    return "scalar/unknown"


VECTOR_BITS = {"AVX-512": 512, "AVX2": 256, "AVX": 256, "SSE4.2": 128, "NEON": 128}


def _size_bytes(text: str) -> int:
    text = text.strip()
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * mult if digits.isdigit() else 0


def cache_levels(base: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> list[dict[str, Any]]:
    """Cache geometry of cpu0 from sysfs: name (L1d, L1i, L2, L3), size, ways, line size, sets."""
    levels = []
    for idx in sorted(base.glob("index*")):
        level, kind = _read(idx / "level").strip(), _read(idx / "type").strip()
        size = _size_bytes(_read(idx / "size"))
        if not level or not size:
            continue
        suffix = "d" if kind == "Data" else "i" if kind == "Instruction" else ""
        ways = int(_read(idx / "ways_of_associativity").strip() or 0)
        line = int(_read(idx / "coherency_line_size").strip() or 64)
        sets = int(_read(idx / "number_of_sets").strip() or 0) or (size // (ways * line) if ways else 0)
        levels.append(
            {
                "name": f"L{level}{suffix}",
                "level": int(level),
                "type": kind,
                "size_bytes": size,
                "ways": ways,
                "line_bytes": line,
                "sets": sets,
            }
        )
    return levels


@functools.lru_cache(maxsize=1)
def cpu_spec() -> dict[str, Any]:
    """What the OS reports (no measurement): model, cores, SIMD level, cache geometry, memory."""
    cpuinfo = _read("/proc/cpuinfo")
    # platform.processor() runs `uname -p` in a subprocess: only when /proc/cpuinfo names no model.
    model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "") or (
        platform.processor() or platform.machine()
    )
    flags_line = next((ln for ln in cpuinfo.splitlines() if ln.startswith(("flags", "Features"))), "")
    flags = set(flags_line.split(":", 1)[1].split()) if ":" in flags_line else set()
    mem_kb = next((int(ln.split()[1]) for ln in _read("/proc/meminfo").splitlines() if ln.startswith("MemTotal")), 0)
    simd = simd_level(flags)
    caches = cache_levels()
    return {
        "model": model,
        "arch": platform.machine(),
        "cores": os.cpu_count() or 1,
        "simd": simd,
        "vector_bits": VECTOR_BITS.get(simd, 64),
        "has_fma": "fma" in flags or "asimd" in flags,
        "is_virtual_machine": "hypervisor" in flags,
        "memory_bytes": mem_kb * 1024,
        **{f"{c['name']}_bytes": c["size_bytes"] for c in caches},
        "caches": caches,
    }


def last_level_cache(spec: dict[str, Any]) -> dict[str, Any] | None:
    unified = [c for c in spec.get("caches", []) if c["type"] == "Unified"]
    return max(unified, key=lambda c: c["level"]) if unified else None


def machine_key(spec: dict[str, Any]) -> str:
    """Identifies a machine for the peaks cache: same CPU, core count, memory and caches."""
    ident = json.dumps(
        [
            spec["model"],
            spec["arch"],
            spec["cores"],
            spec["simd"],
            spec["memory_bytes"] // 2**30,
            [c["size_bytes"] for c in spec.get("caches", [])],
            PEAKS_VERSION,
        ]
    )
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


# The peak benchmark. Why these choices:
# - GCC vector extensions at the machine's widest width (chosen by the -march=native macros), so
#   the FMA loop runs at full vector width without intrinsics;
# - 10 independent accumulator chains hide FMA latency on two FMA ports and still fit in 16
#   registers (AVX2) with the two constant operands;
# - triad a = b + s*c counts 12 bytes per element (STREAM's convention, no write-allocate), best of
#   5 passes over arrays several times the last-level cache; run twice, with ordinary stores and
#   with streaming (non-temporal) stores, and the DRAM roof is the better of the two. Why: with
#   ordinary stores every written line is first read (write-allocate), so the 12 counted bytes cost
#   16 moved and the roof sat at ~3/4 of what a kernel writing with streaming stores reaches with
#   the same 12 counted bytes (the demo's streaming ReLU read 169% of that roof). Counting only
#   compulsory bytes on both sides (the kernel's min_bytes never counts write-allocate either) keeps
#   roof and kernel comparable;
# - every rate is work / the thread's own CPU time, summed over threads: on a shared machine other
#   processes preempt the benchmark, and wall time would record their load as a slower machine
#   (the roofline likewise uses a kernel's CPU time when it was preempted).
PEAKS_SOURCE = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <omp.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
constexpr int VBYTES = 64;
#elif defined(__AVX__)
constexpr int VBYTES = 32;
#else
constexpr int VBYTES = 16;
#endif
typedef float vf __attribute__((vector_size(VBYTES)));
constexpr int LANES = VBYTES / 4, CHAINS = 10;

static double cpu_s() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float fma_loop(long iters, float seed) {
    vf acc[CHAINS], mul, add;
    for (int l = 0; l < LANES; ++l) { mul[l] = 0.9999f; add[l] = seed * 1e-3f; }
    for (int c = 0; c < CHAINS; ++c) for (int l = 0; l < LANES; ++l) acc[c][l] = seed + c;
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < CHAINS; ++c) acc[c] = acc[c] * mul + add;
    float s = 0.f;
    for (int c = 0; c < CHAINS; ++c) for (int l = 0; l < LANES; ++l) s += acc[c][l];
    return s;
}

// Sum over threads of (FLOPs / the thread's CPU seconds), best of 3 after calibration.
static double fma_gflops(int threads, volatile float* sink) {
    long iters = 1 << 20;
    double best = 0.0;
    for (int rep = 0; rep < 5; ++rep) {
        double rate = 0.0, shortest = 1e30;
        #pragma omp parallel num_threads(threads) reduction(+ : rate) reduction(min : shortest)
        {
            double t0 = cpu_s();
            float s = fma_loop(iters, 1.0f + omp_get_thread_num());
            double dt = cpu_s() - t0;
            #pragma omp atomic
            *sink += s;
            rate += 2.0 * LANES * CHAINS * (double)iters / dt;
            shortest = dt;
        }
        if (rep > 1 && rate > best) best = rate;
        if (shortest < 0.05) iters *= 4;  // calibrate to ~0.05-0.2 s of CPU time per thread
    }
    return best / 1e9;
}

static double triad_gbs(float* a, const float* b, const float* c, long n, int threads) {
    double best = 0.0;
    for (int rep = 0; rep < 5; ++rep) {
        double rate = 0.0;
        #pragma omp parallel num_threads(threads) reduction(+ : rate)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            long lo = n * t / nt, hi = n * (t + 1) / nt;
            double t0 = cpu_s();
            #pragma omp simd
            for (long i = lo; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
            rate += 12.0 * (double)(hi - lo) / (cpu_s() - t0);
        }
        if (rate > best) best = rate;
    }
    return best / 1e9;
}

// The same triad with streaming (non-temporal) stores: the written lines are not read first.
// 0 where the target has no streaming store (then the ordinary triad is the roof).
static double triad_nt_gbs(float* a, const float* b, const float* c, long n, int threads) {
#if defined(__SSE2__)
    double best = 0.0;
    for (int rep = 0; rep < 5; ++rep) {
        double rate = 0.0;
        #pragma omp parallel num_threads(threads) reduction(+ : rate)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            // Chunk bounds on whole vectors (the arrays are 64-byte aligned); the last thread takes the tail.
            long lo = (n * t / nt) & ~(long)(LANES - 1), hi = t == nt - 1 ? n : (n * (t + 1) / nt) & ~(long)(LANES - 1);
            long vhi = lo + (hi - lo) / LANES * LANES;
            double t0 = cpu_s();
            for (long i = lo; i < vhi; i += LANES) {
                vf v = *(const vf*)(b + i) + 3.0f * *(const vf*)(c + i);
#if defined(__AVX512F__)
                _mm512_stream_ps(a + i, (__m512)v);
#elif defined(__AVX__)
                _mm256_stream_ps(a + i, (__m256)v);
#else
                _mm_stream_ps(a + i, (__m128)v);
#endif
            }
            for (long i = vhi; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
            _mm_sfence();
            rate += 12.0 * (double)(hi - lo) / (cpu_s() - t0);
        }
        if (rate > best) best = rate;
    }
    return best / 1e9;
#else
    (void)a; (void)b; (void)c; (void)n; (void)threads;
    return 0.0;
#endif
}

// Triad bandwidth with a working set of `bytes` (the three arrays together) per thread, each
// thread on its own arrays, passes repeated over the same data so it stays in the cache level it
// fits; per thread CPU second, summed over threads, best of 4 calibrated repetitions.
static double level_gbs(long bytes, int threads) {
    double sum = 0.0;
    #pragma omp parallel num_threads(threads) reduction(+ : sum)
    {
        long n = (bytes / 12) & ~15L;
        if (n < 64) n = 64;
        float* x = (float*)aligned_alloc(64, n * 4);
        float* y = (float*)aligned_alloc(64, n * 4);
        float* z = (float*)aligned_alloc(64, n * 4);
        for (long i = 0; i < n; ++i) { x[i] = 0.f; y[i] = 1.f; z[i] = 2.f; }
        long passes = (64L << 20) / (12 * n) + 1;
        double best = 0.0;
        for (int rep = 0, measured = 0; rep < 16 && measured < 4; ++rep) {
            double t0 = cpu_s();
            for (long p = 0; p < passes; ++p) {
                #pragma omp simd
                for (long i = 0; i < n; ++i) x[i] = y[i] + 3.0f * z[i];
                asm volatile("" : : "r"(x) : "memory");  // every pass really runs
            }
            double dt = cpu_s() - t0;
            if (dt < 0.02) { passes *= 4; continue; }
            ++measured;
            double r = 12.0 * (double)n * (double)passes / dt;
            if (r > best) best = r;
        }
        free(x); free(y); free(z);
        sum += best;
    }
    return sum / 1e9;
}

int main(int argc, char** argv) {
    long array_bytes = atol(argv[1]);
    int cores = atoi(argv[2]);
    long n = array_bytes / 4;
    float* a = (float*)aligned_alloc(64, n * 4);
    float* b = (float*)aligned_alloc(64, n * 4);
    float* c = (float*)aligned_alloc(64, n * 4);
    if (!a || !b || !c) { fprintf(stderr, "allocation failed\n"); return 1; }
    #pragma omp parallel for num_threads(cores) schedule(static)
    for (long i = 0; i < n; ++i) { a[i] = 0.f; b[i] = 1.f; c[i] = 2.f; }
    volatile float sink = 0.f;
    double f1 = fma_gflops(1, &sink), fa = cores > 1 ? fma_gflops(cores, &sink) : f1;
    double t1 = triad_gbs(a, b, c, n, 1), ta = cores > 1 ? triad_gbs(a, b, c, n, cores) : t1;
    double s1 = triad_nt_gbs(a, b, c, n, 1), sa = cores > 1 ? triad_nt_gbs(a, b, c, n, cores) : s1;
    // argv[3...]: "bytes_1t:bytes_per_thread_all" working sets of the cache levels.
    printf("{\"level_gbs\": [");
    for (int k = 3; k < argc; ++k) {
        long w1 = atol(argv[k]), wa = atol(strchr(argv[k], ':') + 1);
        double l1 = level_gbs(w1, 1), la = cores > 1 ? level_gbs(wa, cores) : l1;
        printf("%s[%.3f, %.3f]", k > 3 ? ", " : "", l1, la);
    }
    printf("], \"fma_gflops_1t\": %.3f, \"fma_gflops_all\": %.3f, \"triad_gbs_1t\": %.3f, "
           "\"triad_gbs_all\": %.3f, \"triad_nt_gbs_1t\": %.3f, \"triad_nt_gbs_all\": %.3f, "
           "\"vector_bytes\": %d, \"check\": %.1f}\n",
           f1, fa, t1, ta, s1, sa, VBYTES, (double)a[n / 2] + 0.0 * sink);
    return 0;
}
"""


def _peaks_path(spec: dict[str, Any]) -> Path:
    from pragma.graph.context import data_dir

    return data_dir() / "hardware" / f"peaks_{machine_key(spec)}.json"


def cached_peaks(spec: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The measured peaks of this machine if they were measured before; never measures."""
    spec = spec or cpu_spec()
    text = _read(_peaks_path(spec))
    try:
        peaks = json.loads(text) if text else None
    except ValueError:
        return None
    return peaks if isinstance(peaks, dict) and peaks.get("status") == "ok" else None


def triad_array_bytes(spec: dict[str, Any]) -> int:
    """Each of the three triad arrays: together about 4x the last-level cache, within limits."""
    llc = last_level_cache(spec)
    want = 4 * (llc["size_bytes"] if llc else 0) // 3
    cap = max(TRIAD_MIN_ARRAY_BYTES, spec.get("memory_bytes", 0) // 16)
    return int(min(max(want, TRIAD_MIN_ARRAY_BYTES), TRIAD_MAX_ARRAY_BYTES, cap))


def cache_roof_levels(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The data cache levels a working set can live in, smallest first, with what the benchmark
    measures for each: half the level's size (the other half holds code, stack and whatever the
    kernel's neighbours touch), per thread for private levels (L1, L2), split between threads for
    shared ones (the last level). A shared level also gets ``rungs_1t_bytes``: that half, then
    halved again down to twice the level below for each thread. Why: a VM reports its host's whole last level (a
    2-core VM here: 260 MiB of L3); its share is far smaller, the half-size benchmark streamed from
    DRAM and every 4-130 MB working set got DRAM's roof under an L3 label, which honest kernels
    exceeded. The rungs find the size the level really holds (``usable_share``)."""
    data = sorted((c for c in spec.get("caches", []) if c["type"] in ("Data", "Unified")), key=lambda c: c["level"])
    cores = max(1, int(spec.get("cores", 1)))
    llc = last_level_cache(spec)
    out = []
    below = 0
    for c in data:
        # The last unified level is shared by the cores of a socket/CCX; lower levels are per core.
        shared = llc is not None and c is llc and c["level"] >= 3
        level = {
            "name": c["name"],
            "size_bytes": c["size_bytes"],
            "shared": shared,
            "bench_1t_bytes": c["size_bytes"] // 2,
            "bench_per_thread_all_bytes": c["size_bytes"] // (2 * cores) if shared else c["size_bytes"] // 2,
        }
        if shared:
            rungs = [c["size_bytes"] // 2]
            # Down to twice the level below per thread, so the all-threads figure is this level's too.
            while len(rungs) < SHARED_LEVEL_RUNGS and rungs[-1] // 2 >= 2 * below * cores:
                rungs.append(rungs[-1] // 2)
            level["rungs_1t_bytes"] = rungs
        out.append(level)
        below = c["size_bytes"]
    return out


def bench_args(levels: list[dict[str, Any]], cores: int) -> list[str]:
    """The peak benchmark's level arguments ("bytes_1t:bytes_per_thread_all"), every rung of a
    shared level after its own half-size figure's place, in ``levels`` order."""
    args = []
    for lv in levels:
        for r in lv.get("rungs_1t_bytes") or [lv["bench_1t_bytes"]]:
            per_thread = r // max(1, cores) if lv["shared"] else lv["bench_per_thread_all_bytes"]
            args.append(f"{r}:{per_thread}")
    return args


def usable_share(level: dict[str, Any], figures: list[tuple[float, float]]) -> dict[str, Any]:
    """A level with its measured bandwidths, from the benchmark's figures for its rungs (largest
    first; one figure for a level without rungs). The level holds what it is said to hold
    (``usable_bytes`` = its size) when the half-size rung reads like the smaller ones (at least
    ``SHARED_LEVEL_KNEE`` of the smallest rung's bandwidth, one thread); otherwise it holds the
    largest rung that does. Its bandwidth is the best of the rungs it holds: a kernel whose working
    set is a small part of the level runs as fast as the smallest rung, and its roof must not be
    lower (a roof below what an honest kernel reaches is the measurement problem this avoids)."""
    rungs = level.get("rungs_1t_bytes") or [level["bench_1t_bytes"]]
    pairs = list(zip(rungs, figures, strict=True))
    floor = SHARED_LEVEL_KNEE * pairs[-1][1][0]
    held = [(r, f) for r, f in pairs if f[0] >= floor] or pairs[-1:]
    usable = level["size_bytes"] if held[0][0] == rungs[0] else held[0][0]
    out = {k: v for k, v in level.items() if k != "rungs_1t_bytes"}
    out["usable_bytes"] = usable
    out["gbs_1t"] = max(f[0] for _, f in held)
    out["gbs_all"] = max(f[1] for _, f in held)
    if len(pairs) > 1:
        out["rungs"] = [{"bytes_1t": r, "gbs_1t": f[0], "gbs_all": f[1]} for r, f in pairs]
    return out


def measure_peaks(spec: dict[str, Any] | None = None, timeout_s: float = PEAKS_TIMEOUT_S) -> dict[str, Any]:
    """Compile and run the peak benchmark now; returns peaks or ``{"status": "unavailable", ...}``."""
    spec = spec or cpu_spec()
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        return {"status": "unavailable", "reason": "g++ not found: cannot build the peak benchmark"}
    array_bytes = triad_array_bytes(spec)
    with tempfile.TemporaryDirectory(prefix="pragma-peaks-") as tmp:
        src, exe = Path(tmp) / "peaks.cpp", Path(tmp) / "peaks"
        src.write_text(PEAKS_SOURCE)
        build = subprocess.run(
            [
                compiler,
                "-O3",
                "-march=native",
                "-ffp-contract=fast",
                "-fopenmp",
                "-std=c++17",
                str(src),
                "-o",
                str(exe),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if build.returncode != 0:
            return {"status": "unavailable", "reason": f"peak benchmark did not compile: {build.stderr[-300:]}"}
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        try:
            levels = cache_roof_levels(spec)
            run = subprocess.run(
                [str(exe), str(array_bytes), str(spec["cores"]), *bench_args(levels, spec["cores"])],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env={**os.environ, "OMP_PROC_BIND": "false"},
            )
        except subprocess.TimeoutExpired:
            return {"status": "unavailable", "reason": f"peak benchmark exceeded {timeout_s:.0f} s"}
        if run.returncode != 0:
            return {"status": "unavailable", "reason": f"peak benchmark failed: {run.stderr[-300:]}"}
    try:
        figures = json.loads(run.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "unavailable", "reason": f"peak benchmark printed {run.stdout[-200:]!r}"}
    figures.pop("check", None)
    # The DRAM roof is the better of the two stores (see PEAKS_SOURCE); both are kept as measured.
    for threads in ("1t", "all"):
        ordinary, streaming = figures[f"triad_gbs_{threads}"], figures.pop(f"triad_nt_gbs_{threads}", 0.0)
        figures[f"triad_ordinary_gbs_{threads}"] = ordinary
        figures[f"triad_streaming_gbs_{threads}"] = streaming
        figures[f"triad_gbs_{threads}"] = max(ordinary, streaming)
    measured = [tuple(f) for f in figures.pop("level_gbs", [])]
    figures["levels"] = []
    for lv in levels:
        n = len(lv.get("rungs_1t_bytes") or [None])
        figures["levels"].append(usable_share(lv, measured[:n]))
        measured = measured[n:]
    return {
        "status": "ok",
        **figures,
        "cores": spec["cores"],
        "triad_array_bytes": array_bytes,
        "measured_s": round(time.monotonic() - t0, 2),
        "load_avg_1min": round(load, 2),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "model": spec["model"],
    }


def peaks(measure: bool = True, force: bool = False) -> dict[str, Any]:
    """This machine's peaks: from the cache, else measured once (when ``measure``) and cached."""
    spec = cpu_spec()
    if not force and (hit := cached_peaks(spec)):
        return hit
    if not measure:
        return {"status": "unavailable", "reason": "peaks not measured yet on this machine"}
    log.info("measuring peak FLOP/s and memory bandwidth of this machine (once)")
    result = measure_peaks(spec)
    if result["status"] == "ok":
        path = _peaks_path(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, path)
    return result


def measured_peaks() -> dict[str, float]:
    """The cached peaks in flat form for other modules (the verifier's plausibility bound reads
    ``memory_bandwidth_gbps``); empty until a profile measured them. Never measures."""
    peak = cached_peaks()
    if not peak:
        return {}
    return {
        "memory_bandwidth_gbps": max(peak["triad_gbs_1t"], peak["triad_gbs_all"]),
        "fp32_gflops": max(peak["fma_gflops_1t"], peak["fma_gflops_all"]),
    }


def peaks_for_threads(peak: dict[str, Any], num_threads: int) -> tuple[float, float]:
    """(GFLOP/s, GB/s) attainable with ``num_threads``: FLOP/s scale with cores, bandwidth saturates."""
    cores = max(1, int(peak.get("cores", 1)))
    n = max(1, min(num_threads, cores))
    f1, fa = peak["fma_gflops_1t"], max(peak["fma_gflops_1t"], peak["fma_gflops_all"])
    b1, ba = peak["triad_gbs_1t"], peak["triad_gbs_all"]
    if n == 1 or cores == 1:
        return f1, b1
    frac = (n - 1) / (cores - 1)
    return f1 + frac * (fa - f1), min(max(b1, ba), b1 * n)


def roof_for_working_set(peak: dict[str, Any], working_set_bytes: float, num_threads: int) -> dict[str, Any]:
    """The bandwidth roof for a kernel whose working set (bytes its calls touch, reused call after
    call) is ``working_set_bytes``: the smallest cache level that holds it with ``num_threads``
    (private levels hold their size per thread), else DRAM (the triad over arrays beyond the last
    level). Peaks measured before per-level figures existed give DRAM, and say so."""
    cores = max(1, int(peak.get("cores", 1)))
    n = max(1, min(num_threads, cores))
    frac = (n - 1) / (cores - 1) if cores > 1 else 0.0
    _, dram = peaks_for_threads(peak, num_threads)
    for lv in peak.get("levels") or []:
        capacity = held_bytes(lv) * (1 if lv["shared"] else n)
        if working_set_bytes <= capacity and lv.get("gbs_1t", 0) > 0:
            gbs = lv["gbs_1t"] + frac * (max(lv["gbs_1t"], lv["gbs_all"]) - lv["gbs_1t"])
            # A level is never slower than DRAM: a noisy cache figure must not lower the roof.
            return {
                "level": lv["name"],
                "roof_gbs": max(gbs, dram),
                "capacity_bytes": capacity,
                "dram_gbs": dram,
                "why": (
                    f"working set {_mb(working_set_bytes)} fits {lv['name']} ({_mb(capacity)}{_of_reported(lv)} "
                    f"at {n} thread(s))"
                ),
            }
    if not peak.get("levels"):
        return {
            "level": "DRAM",
            "roof_gbs": dram,
            "capacity_bytes": 0,
            "dram_gbs": dram,
            "why": "no per-level bandwidths measured (older peaks): DRAM triad",
        }
    # Beyond the last level, at best a last level's worth of the working set is still there from the
    # previous call (the profiled region calls the kernel on the same tensors) and the rest comes from
    # DRAM: the roof is that blend, which tends to DRAM's as the working set grows. Why not DRAM's
    # alone: an ordinary-store ReLU over 65.5 MB read 105% of the DRAM roof here (32 MiB L3, part of
    # its input still in it); no kernel can beat the blend.
    last = peak["levels"][-1]
    last_gbs = last.get("gbs_1t", 0) + frac * (
        max(last.get("gbs_1t", 0), last.get("gbs_all", 0)) - last.get("gbs_1t", 0)
    )
    cached = min(float(held_bytes(last)), float(working_set_bytes))
    blend = dram
    if last_gbs > dram > 0 and working_set_bytes > 0:
        blend = working_set_bytes / ((working_set_bytes - cached) / dram + cached / last_gbs)
    return {
        "level": "DRAM",
        "roof_gbs": blend,
        "capacity_bytes": 0,
        "dram_gbs": dram,
        "why": (
            f"working set {_mb(working_set_bytes)} exceeds {last['name']} ({_mb(held_bytes(last))}{_of_reported(last)}): at best "
            f"{_mb(cached)} of it from {last['name']}, the rest from DRAM"
        ),
    }


def held_bytes(level: dict[str, Any]) -> int:
    """What a level holds: its measured usable share (peaks before PEAKS_VERSION 5: its size)."""
    return int(level.get("usable_bytes") or level["size_bytes"])


def _of_reported(level: dict[str, Any]) -> str:
    return (
        "" if held_bytes(level) >= level["size_bytes"] else f" measured usable of {_mb(level['size_bytes'])} reported"
    )


def _mb(n: float) -> str:
    return f"{n / 1e6:.3g} MB" if n >= 1e5 else f"{n / 1e3:.3g} kB"


def render_spec(spec: dict[str, Any], num_threads: int, peak: dict[str, Any] | None = None) -> str:
    """One short paragraph for prompts; includes measured peaks when they are known."""
    caches = ", ".join(f"{c['name']} {c['size_bytes'] // 1024} KiB" for c in spec.get("caches", []))
    text = (
        f"CPU {spec['model']} ({spec['arch']}{', virtual machine' if spec.get('is_virtual_machine') else ''}), "
        f"{spec['cores']} cores, SIMD {spec['simd']}{' with FMA' if spec['has_fma'] else ''} "
        f"({spec.get('vector_bits', 0)}-bit vectors); caches: {caches or 'unknown'}; "
        f"memory {spec['memory_bytes'] / 2**30:.0f} GiB. Kernels run with {num_threads} thread(s)."
    )
    peak = peak or cached_peaks(spec)
    if peak and peak.get("status") == "ok":
        gflops, gbs = peaks_for_threads(peak, num_threads)
        text += (
            f" Measured peaks at {num_threads} thread(s): {gflops:.1f} GFLOP/s fp32 (FMA), "
            f"{gbs:.1f} GB/s memory bandwidth (triad, the better of ordinary and streaming stores); "
            f"ridge point {gflops / gbs:.1f} FLOP/byte."
        )
        if peak.get("levels"):
            text += (
                " Bandwidth by where the data lives: "
                + ", ".join(
                    f"{lv['name']} {roof_for_working_set(peak, held_bytes(lv) // 2, num_threads)['roof_gbs']:.0f} GB/s"
                    # A VM's level that holds less than sysfs reports says so (the caches list above
                    # is sysfs's: 'L3 266240 KiB' on a VM that holds 65 MiB of it).
                    + (f" (up to {_mb(held_bytes(lv))}{_of_reported(lv)})" if _of_reported(lv) else "")
                    for lv in peak["levels"]
                )
                + f", DRAM {gbs:.1f} GB/s."
            )
        if peak.get("load_avg_1min", 0.0) > spec["cores"]:
            text += f" (Measured under load {peak['load_avg_1min']:.1f} on {spec['cores']} cores: may understate.)"
    return text
