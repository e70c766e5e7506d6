"""Backends: what changes between CPU (C++ kernels) and GPU (Triton kernels) runs.

A backend bundles the Coder's instructions, the verifier's sandbox settings, the profiler and the
hardware summary. ``Context.backend`` picks one; ``require`` also checks the machine can run it
and raises :class:`BackendUnavailable` (a one-line message the CLI prints with exit code 2).

Device resolution and the sandbox's device settings live in ``tools/device.py`` (re-exported
here), so the verifier and the profilers need not import this façade.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from pragma.graph.context import Context

# Re-exported: callers (and tests) reach the device helpers through the façade as before.
from pragma.tools.device import (  # noqa: F401
    GPU_ENV_PASSTHROUGH,
    GPU_PLAUSIBILITY_SLACK,
    BackendUnavailable,
    cuda_status,
    device_for,
    gpu_plausibility,
    interpreter_on,
    is_interpreted,
    memory_limit_bytes,
    plausibility,
    sandbox_env,
    sandbox_request,
)

log = logging.getLogger(__name__)


# --- the backends ----------------------------------------------------------------------------


class Backend(Protocol):
    name: str

    @property
    def coder_system(self) -> str: ...

    def check(self, ctx: Context) -> None: ...

    def hardware_summary(self, ctx: Context) -> str: ...

    def verify(
        self, problem_path: str, code: str, ctx: Context, *, best_code: str | None = None, best_speedup: float = 0.0
    ) -> dict[str, Any]: ...

    def profile(
        self, problem_path: str, code: str, ctx: Context, extra_metrics: list[str] | None = None
    ) -> dict[str, Any]: ...

    def render_profile(self, profile: dict[str, Any]) -> str: ...


def _verify(
    problem_path: str, code: str, ctx: Context, *, best_code: str | None = None, best_speedup: float = 0.0
) -> dict[str, Any]:
    # The verifier is device-aware (sandbox_request/env above), so one function serves both backends.
    from pragma.tools.verify import verify_candidate

    return verify_candidate(problem_path, code, ctx, best_code=best_code, best_speedup=best_speedup)


class CpuBackend:
    name = "cpu"

    @property
    def coder_system(self) -> str:
        from pragma.nodes import prompts

        return prompts.CODER_SYSTEM

    def check(self, ctx: Context) -> None:
        return None

    def hardware_summary(self, ctx: Context) -> str:
        from pragma.tools import hardware

        return hardware.render_spec(hardware.cpu_spec(), ctx.num_threads)

    verify = staticmethod(_verify)

    def profile(
        self, problem_path: str, code: str, ctx: Context, extra_metrics: list[str] | None = None
    ) -> dict[str, Any]:
        from pragma.tools.profilers import cpu

        return cpu.profile_candidate(problem_path, code, ctx, extra_metrics)

    def render_profile(self, profile: dict[str, Any]) -> str:
        from pragma.tools.profilers import cpu

        return cpu.render_profile(profile)


class GpuBackend:
    name = "gpu"

    @property
    def coder_system(self) -> str:
        from pragma.nodes import prompts

        return prompts.CODER_SYSTEM_TRITON

    def check(self, ctx: Context) -> None:
        if device_for(ctx) == "cpu":
            log.warning(
                "backend=gpu without a CUDA device: Triton kernels run under TRITON_INTERPRET=1 on "
                "the CPU (correctness only; timings measure the interpreter, nothing is profiled)"
            )

    def hardware_summary(self, ctx: Context) -> str:
        from pragma.tools import gpu_spec

        if device_for(ctx) == "cpu":
            return "no GPU: Triton interpreter on the CPU (TRITON_INTERPRET=1), correctness checks only"
        return gpu_spec.render_spec(gpu_spec.device_spec())

    verify = staticmethod(_verify)

    def profile(
        self, problem_path: str, code: str, ctx: Context, extra_metrics: list[str] | None = None
    ) -> dict[str, Any]:
        from pragma.tools.profilers import gpu

        return gpu.profile_candidate(problem_path, code, ctx, extra_metrics)

    def render_profile(self, profile: dict[str, Any]) -> str:
        from pragma.tools.profilers import gpu

        return gpu.render_profile(profile)


BACKENDS: dict[str, Backend] = {"cpu": CpuBackend(), "gpu": GpuBackend()}


def backend_for(ctx: Context) -> Backend:
    """The backend ``ctx.backend`` names (no machine check: prompts and rendering need none)."""
    return BACKENDS[ctx.backend]


def require(ctx: Context) -> Backend:
    """The backend, after checking this machine can run it (raises BackendUnavailable)."""
    backend = backend_for(ctx)
    device_for(ctx)
    backend.check(ctx)
    return backend


def render_profile(profile: dict[str, Any]) -> str:
    """Prompt text for a profile of either backend (each profile names the backend that made it)."""
    return BACKENDS.get(profile.get("backend", "cpu"), BACKENDS["cpu"]).render_profile(profile)
