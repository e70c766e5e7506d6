"""GPU hardware spec for prompts, the roofline and the plausibility bound.

What the device reports (SM count, clocks, memory bus, L2 size, shared memory, registers) comes
from torch's device properties and Triton's CUDA driver utilities. Peak figures are derived, not
measured: DRAM bandwidth = 2 (double data rate) x memory clock x bus width, and peak FLOP/s per
dtype = SM count x SM clock x dense FLOPs per clock per SM for the architecture (table below,
from NVIDIA's published per-SM throughputs). They are nominal ceilings: sustained figures are
lower (clocks drop under load), which is why the roofline reports "% of nominal peak".

``spec_from_properties`` is pure (tested on CPU with recorded property dicts); ``device_spec``
queries the real device and returns ``{"status": "unavailable", ...}`` without CUDA.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

log = logging.getLogger(__name__)

# Dense FLOPs per clock per SM (an FMA counts 2). Tensor-core rows assume fp32 accumulation where
# the part distinguishes; fp64 is the vector (non-tensor) rate. None: the architecture has no
# such unit. Keys are compute capabilities.
FLOP_PER_CLOCK_PER_SM: dict[tuple[int, int], dict[str, int | None]] = {
    (7, 0): {"fp32": 128, "fp64": 64, "fp16": 1024, "bf16": None, "tf32": None, "fp8": None, "int8": None},
    (7, 5): {"fp32": 128, "fp64": 4, "fp16": 1024, "bf16": None, "tf32": None, "fp8": None, "int8": 2048},
    (8, 0): {"fp32": 128, "fp64": 64, "fp16": 2048, "bf16": 2048, "tf32": 1024, "fp8": None, "int8": 4096},
    (8, 6): {"fp32": 256, "fp64": 4, "fp16": 1024, "bf16": 1024, "tf32": 512, "fp8": None, "int8": 2048},
    (8, 7): {"fp32": 256, "fp64": 4, "fp16": 1024, "bf16": 1024, "tf32": 512, "fp8": None, "int8": 2048},
    (8, 9): {"fp32": 256, "fp64": 4, "fp16": 1024, "bf16": 1024, "tf32": 512, "fp8": 2048, "int8": 2048},
    (9, 0): {"fp32": 256, "fp64": 128, "fp16": 4096, "bf16": 4096, "tf32": 2048, "fp8": 8192, "int8": 8192},
    (10, 0): {"fp32": 256, "fp64": 128, "fp16": 8192, "bf16": 8192, "tf32": 4096, "fp8": 16384, "int8": 16384},
}
# Which peak bounds a kernel on this dtype: fp16/bf16/tf32/fp8 run on tensor cores only inside
# matrix products; everything else (and elementwise work in any dtype) runs on the fp32 pipes.
TENSOR_DTYPES = ("fp16", "bf16", "tf32", "fp8", "int8")
TORCH_DTYPE_NAMES = {
    "float32": "fp32",
    "float64": "fp64",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int8": "int8",
}


def peak_tflops(cc: tuple[int, int], sm_count: int, sm_clock_khz: int) -> dict[str, float]:
    """Nominal dense peak TFLOP/s per dtype; dtypes the table does not know are left out."""
    row = FLOP_PER_CLOCK_PER_SM.get(cc)
    if row is None or sm_count <= 0 or sm_clock_khz <= 0:
        return {}
    clock_hz = sm_clock_khz * 1e3
    return {dtype: sm_count * clock_hz * per_clock / 1e12 for dtype, per_clock in row.items() if per_clock}


def dram_gbs(mem_clock_khz: int, bus_width_bits: int) -> float:
    """Nominal DRAM bandwidth in GB/s: two transfers per memory clock over the whole bus."""
    return 2 * mem_clock_khz * 1e3 * bus_width_bits / 8 / 1e9


def spec_from_properties(props: dict[str, Any]) -> dict[str, Any]:
    """The spec dict from raw device properties (torch names merged with Triton's driver names)."""
    cc = (int(props["major"]), int(props["minor"]))
    sm_count = int(props.get("multi_processor_count") or props.get("multiprocessor_count") or 0)
    sm_clock_khz = int(props.get("sm_clock_rate") or 0)
    mem_clock_khz = int(props.get("mem_clock_rate") or 0)
    bus_bits = int(props.get("mem_bus_width") or 0)
    peaks = peak_tflops(cc, sm_count, sm_clock_khz)
    bandwidth = dram_gbs(mem_clock_khz, bus_bits) if mem_clock_khz and bus_bits else 0.0
    notes = []
    if not peaks:
        notes.append(f"no per-SM throughput table for sm_{cc[0]}{cc[1]} (or no clock): peak FLOP/s unknown")
    if not bandwidth:
        notes.append("memory clock or bus width not reported: peak bandwidth unknown")
    return {
        "status": "ok",
        "name": str(props.get("name", "unknown GPU")),
        "compute_capability": f"{cc[0]}.{cc[1]}",
        "sm_count": sm_count,
        "sm_clock_mhz": sm_clock_khz / 1e3,
        "mem_clock_mhz": mem_clock_khz / 1e3,
        "mem_bus_width_bits": bus_bits,
        "l2_bytes": int(props.get("L2_cache_size") or 0),
        "total_memory_bytes": int(props.get("total_memory") or 0),
        "shared_mem_per_block_optin_bytes": int(
            props.get("shared_memory_per_block_optin") or props.get("max_shared_mem") or 0
        ),
        "regs_per_sm": int(props.get("regs_per_multiprocessor") or props.get("max_num_regs") or 0),
        "max_threads_per_sm": int(props.get("max_threads_per_multi_processor") or 0),
        "warp_size": int(props.get("warp_size") or props.get("warpSize") or 32),
        "peak_gbs": bandwidth,
        "peak_tflops": peaks,
        "source": "device properties; peaks nominal (clock x bus width, clock x SMs x FLOPs/clock/SM table)",
        "notes": notes,
    }


def _torch_properties(index: int) -> dict[str, Any]:
    import torch

    p = torch.cuda.get_device_properties(index)
    names = (
        "name",
        "major",
        "minor",
        "multi_processor_count",
        "L2_cache_size",
        "total_memory",
        "shared_memory_per_block_optin",
        "regs_per_multiprocessor",
        "max_threads_per_multi_processor",
        "warp_size",
        "clock_rate",
        "memory_clock_rate",
        "memory_bus_width",
    )
    return {n: getattr(p, n) for n in names if hasattr(p, n)}


def _triton_properties(index: int) -> dict[str, Any]:
    """Clocks and bus width (torch does not report them everywhere); {} when Triton cannot ask."""
    try:
        from triton.runtime import driver

        return dict(driver.active.utils.get_device_properties(index))
    except Exception as exc:  # optional source: the spec says what it lacks
        log.info("triton device properties unavailable: %s", exc)
        return {}


@functools.lru_cache(maxsize=4)
def device_spec(index: int = 0) -> dict[str, Any]:
    """Spec of CUDA device ``index``, or ``{"status": "unavailable", "reason": ...}``."""
    try:
        import torch

        if not torch.cuda.is_available():
            return {"status": "unavailable", "reason": "no CUDA device (torch.cuda.is_available() is False)"}
        props = _torch_properties(index)
    except Exception as exc:  # a broken driver is an unavailable device, not a crash
        return {"status": "unavailable", "reason": f"cannot query CUDA device {index}: {exc}"}
    props = {**_triton_properties(index), **props}
    # torch reports clock rates (when it does) in kHz like the driver; prefer its names if present.
    props.setdefault("sm_clock_rate", props.get("clock_rate", 0))
    props["mem_clock_rate"] = props.get("memory_clock_rate") or props.get("mem_clock_rate", 0)
    props["mem_bus_width"] = props.get("memory_bus_width") or props.get("mem_bus_width", 0)
    return spec_from_properties(props)


def dtype_key(dtype: Any) -> str:
    """'fp32' etc. for a torch dtype or its name."""
    return TORCH_DTYPE_NAMES.get(str(dtype).replace("torch.", ""), "fp32")


def compute_peak_gflops(spec: dict[str, Any], dtype: str = "fp32", uses_tensor_cores: bool = False) -> float:
    """The compute roof for a kernel: the tensor-core peak of its dtype when it multiplies
    matrices on tensor cores, else the fp32/fp64 pipes. 0 when unknown."""
    peaks = spec.get("peak_tflops") or {}
    if uses_tensor_cores and dtype == "fp32":
        dtype = "tf32"
    key = dtype if (uses_tensor_cores and dtype in TENSOR_DTYPES) else ("fp64" if dtype == "fp64" else "fp32")
    return 1e3 * float(peaks.get(key, 0.0))


def render_spec(spec: dict[str, Any]) -> str:
    """One line for the Coder's and Conductor's <hardware> section."""
    if spec.get("status") != "ok":
        return f"GPU: unavailable ({spec.get('reason', '')})"
    peaks = ", ".join(f"{k} {v:.0f}" for k, v in spec["peak_tflops"].items())
    return (
        f"GPU {spec['name']} (sm_{spec['compute_capability'].replace('.', '')}): {spec['sm_count']} SMs at "
        f"{spec['sm_clock_mhz']:.0f} MHz, L2 {spec['l2_bytes'] / 2**20:.0f} MiB, "
        f"{spec['shared_mem_per_block_optin_bytes'] / 1024:.0f} KiB shared memory per block (opt-in), "
        f"{spec['regs_per_sm']} registers per SM, {spec['total_memory_bytes'] / 2**30:.0f} GiB memory at "
        f"{spec['peak_gbs']:.0f} GB/s nominal; nominal peak TFLOP/s: {peaks or 'unknown'}"
    )
