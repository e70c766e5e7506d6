"""Device helpers: where a run's tensors live and what the verifier's sandbox needs for that device.

Split out of ``backends.py`` so the verifier (``verify.py``) and the profilers read the device
without importing the ``Backend`` façade, which imports them back (the import circle
backends -> verify -> backends). ``backends`` re-exports every name here for its callers.

Device resolution for ``backend=gpu``: a CUDA device when torch sees one; otherwise, when
``TRITON_INTERPRET=1`` is set in the environment, the CPU under Triton's interpreter (correctness
only: the timings measure the interpreter, the profile is unavailable); otherwise unavailable.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from pragma.graph.context import Context, data_dir

log = logging.getLogger(__name__)

# Variables a GPU sandbox passes through (none is a secret). Only values that are not directories:
# the sandbox makes every absolute directory in its extra environment writable (Landlock), so
# LD_LIBRARY_PATH, CUDA_HOME or TRITON_LIBCUDA_PATH would open the CUDA install to writes; Triton
# finds libcuda through ldconfig instead.
GPU_ENV_PASSTHROUGH = ("CUDA_VISIBLE_DEVICES", "TRITON_PTXAS_PATH")
# Inputs are flushed from L2 before every timed call, but outputs may still be absorbed by L2:
# a kernel can beat DRAM bandwidth on its write half. Only times below half the DRAM bound are
# impossible.
GPU_PLAUSIBILITY_SLACK = 2.0


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot run on this machine (the message says why and what to do)."""


def cuda_status() -> tuple[bool, str]:
    """(a CUDA device is usable, why not)."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        return False, f"torch cannot be imported ({exc})"
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        return False, f"this torch ({torch.__version__}) is a CPU-only build"
    if not torch.cuda.is_available():
        return False, "torch.cuda.is_available() is False (no device or no driver)"
    return True, ""


def interpreter_on() -> bool:
    """Triton's interpreter runs kernels on CPU tensors (it must be set before triton.jit runs)."""
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def device_for(ctx: Context) -> str:
    """'cpu' or 'cuda': where the verifier puts the problem's tensors for this run."""
    if ctx.backend != "gpu":
        return "cpu"
    ok, why = cuda_status()
    if ok:
        return "cuda"
    if interpreter_on():
        return "cpu"
    raise BackendUnavailable(
        f"backend=gpu needs a CUDA device, but {why}; use backend=cpu, or set TRITON_INTERPRET=1 to "
        "check Triton kernels for correctness on the CPU (timings are then meaningless)"
    )


def is_interpreted(ctx: Context) -> bool:
    return ctx.backend == "gpu" and device_for(ctx) == "cpu"


# --- the verifier's sandbox settings (tools/verify.py reads these) ---------------------------


def sandbox_request(ctx: Context) -> dict[str, Any]:
    """Request fields for the in-sandbox worker: the device and, on CUDA, the timing method."""
    device = device_for(ctx)
    fields: dict[str, Any] = {"device": device}
    if device == "cuda":
        from pragma.tools import gpu_spec

        fields["gpu_timing"] = ctx.gpu_timing
        fields["device_note"] = f"cuda ({gpu_spec.device_spec().get('name', 'unknown GPU')})"
    elif ctx.backend == "gpu":
        fields["device_note"] = "cpu (Triton interpreter): correctness only, timings measure the interpreter"
    return fields


def sandbox_env(ctx: Context) -> dict[str, str]:
    """Extra environment for a GPU sandbox: a shared Triton cache (compiled once per source, and an
    absolute directory, so the sandbox lets the worker write there) and the driver's paths."""
    if ctx.backend != "gpu":
        return {}
    cache = data_dir() / "build" / "triton"
    cache.mkdir(parents=True, exist_ok=True)
    env = {"TRITON_CACHE_DIR": str(cache)}
    env.update({k: v for k in GPU_ENV_PASSTHROUGH if (v := os.environ.get(k)) and not os.path.isdir(v)})
    return env


def memory_limit_bytes(ctx: Context) -> int:
    """Address-space limit of the sandbox. CUDA reserves virtual address space far beyond physical
    memory (unified addressing), so an RLIMIT_AS makes context creation fail: on a CUDA device the
    limit is lifted and device memory is bounded by the GPU itself."""
    import resource

    return resource.RLIM_INFINITY if device_for(ctx) == "cuda" else ctx.memory_limit_bytes


def gpu_plausibility(traffic_bytes: int, runtime_min_ms: float, spec: dict[str, Any]) -> dict[str, Any]:
    """``speedup_plausible`` against the device's nominal DRAM bandwidth (inputs are flushed from
    L2 before every timed call, so they come from DRAM)."""
    base = {"rule": "speedup_plausible", "is_suspicious": False, "bandwidth_bytes_per_s": 0.0, "min_time_bound_ms": 0.0}
    if traffic_bytes <= 0 or runtime_min_ms <= 0:
        return {**base, "verdict": "skip", "detail": "no tensor traffic to bound"}
    if spec.get("status") != "ok" or not spec.get("peak_gbs"):
        return {**base, "verdict": "skip", "detail": f"GPU bandwidth unknown ({spec.get('reason', 'no spec')})"}
    bandwidth = spec["peak_gbs"] * 1e9
    bound_ms = traffic_bytes / (bandwidth * GPU_PLAUSIBILITY_SLACK) * 1e3
    implied = traffic_bytes / (runtime_min_ms / 1e3)
    suspicious = runtime_min_ms < bound_ms
    detail = (
        f"{traffic_bytes} bytes in {runtime_min_ms:.4g} ms = {implied / 1e9:.1f} GB/s; nominal DRAM "
        f"{bandwidth / 1e9:.0f} GB/s x {GPU_PLAUSIBILITY_SLACK} slack -> at least {bound_ms:.4g} ms"
    )
    return {
        **base,
        "verdict": "warn" if suspicious else "pass",
        "is_suspicious": suspicious,
        "detail": ("faster than memory traffic allows: " if suspicious else "") + detail,
        "bandwidth_bytes_per_s": bandwidth,
        "min_time_bound_ms": bound_ms,
    }


def plausibility(ctx: Context, traffic_bytes: int, runtime_min_ms: float, ref_runtime_min_ms: float) -> dict:
    """The verifier's physical plausibility check for this backend's device."""
    if device_for(ctx) == "cuda":
        from pragma.tools import gpu_spec

        return gpu_plausibility(traffic_bytes, runtime_min_ms, gpu_spec.device_spec())
    from pragma.tools.judging import physical

    return physical.plausibility(traffic_bytes, runtime_min_ms, ref_runtime_min_ms, ctx.num_threads)
