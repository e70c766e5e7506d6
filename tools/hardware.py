"""Static hardware spec of this machine (cores, SIMD level, caches, memory) for prompts.

Measured peaks (bandwidth, FLOP/s) belong to the full CPU profiler; this module reads only
what the OS reports, so it is cheap enough to call for every run.
"""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path
from typing import Any


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def simd_level(flags: set[str]) -> str:
    for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"),
                       ("asimd", "NEON")):
        if flag in flags:
            return name
    return "scalar/unknown"


def _caches() -> dict[str, int]:
    caches: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        level = _read(str(idx / "level")).strip()
        kind = _read(str(idx / "type")).strip()
        size = _read(str(idx / "size")).strip()
        if not level or not size:
            continue
        name = f"L{level}{'d' if kind == 'Data' else 'i' if kind == 'Instruction' else ''}"
        mult = 1024 if size.endswith("K") else 1024 * 1024 if size.endswith("M") else 1
        caches[f"{name}_bytes"] = int(size.rstrip("KM")) * mult
    return caches


@functools.lru_cache(maxsize=1)
def cpu_spec() -> dict[str, Any]:
    cpuinfo = _read("/proc/cpuinfo")
    model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")),
                 platform.processor() or platform.machine())
    flags_line = next((ln for ln in cpuinfo.splitlines() if ln.startswith(("flags", "Features"))), "")
    flags = set(flags_line.split(":", 1)[1].split()) if ":" in flags_line else set()
    mem_kb = next((int(ln.split()[1]) for ln in _read("/proc/meminfo").splitlines()
                   if ln.startswith("MemTotal")), 0)
    return {
        "model": model, "arch": platform.machine(), "cores": os.cpu_count() or 1,
        "simd": simd_level(flags), "has_fma": "fma" in flags, "memory_bytes": mem_kb * 1024,
        **_caches(),
    }


def render_spec(spec: dict[str, Any], num_threads: int) -> str:
    caches = ", ".join(f"{k.removesuffix('_bytes')} {v // 1024} KiB" for k, v in spec.items()
                       if k.endswith("_bytes") and k.startswith("L"))
    return (f"CPU {spec['model']} ({spec['arch']}), {spec['cores']} cores, SIMD {spec['simd']}"
            f"{' with FMA' if spec['has_fma'] else ''}; caches: {caches or 'unknown'}; "
            f"memory {spec['memory_bytes'] / 2**30:.0f} GiB. Kernels run with {num_threads} thread(s).")
