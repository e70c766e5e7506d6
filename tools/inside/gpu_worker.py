"""In-sandbox support for Triton and CUDA candidates (only the worker imports this module).

- Device placement: on ``device="cuda"`` the reference model, the inputs and the candidate move to
  the GPU exactly as KernelBench does (``.cuda()`` after construction, inputs generated on the CPU
  with the seeded generator and then moved), so both sides see the same values.
- Triton launches (counted as calls into compiled code by ``guards.CallCounter.wrap_triton``) run
  with torch dispatch modes suspended: a real launch dispatches no aten ops (it passes raw
  pointers), and under ``TRITON_INTERPRET=1`` the interpreter's own tensor plumbing (``set_``,
  ``copy_``) is not the candidate's compute. On CUDA each launch during the checks must use the
  stream that was current when they began (rule ``no_side_streams``).
- Under the interpreter, autotuning cannot time configurations (``do_bench`` needs a GPU): the
  first configuration is used.
- Landlock needs the GPU's device nodes writable (CUDA opens them read-write).
- The GPU profiled region: kernel launches between cudaProfilerStart/Stop for Nsight Compute, or
  under torch.profiler (CUPTI kernel timing, which needs no counter permission) as the fallback.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

_HOOK: list[TritonLaunches] = []  # the installed hook (one per worker process)


# --- device placement ---------------------------------------------------------------------------


def _to(value: Any, device: str) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


class DeviceProblem:
    """The problem module with ``Model`` and ``get_inputs`` producing objects on ``device``."""

    def __init__(self, module: Any, device: str):
        self._module, self._device = module, device

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def Model(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - mirrors the problem's class name
        return self._module.Model(*args, **kwargs).to(self._device)

    def get_inputs(self) -> list[Any]:
        return [_to(x, self._device) for x in self._module.get_inputs()]


def on_device(problem: Any, device: str) -> Any:
    return problem if device == "cpu" else DeviceProblem(problem, device)


def to_device(model: Any, device: str) -> Any:
    """``model.to(device)`` for nn.Modules (KernelBench calls .cuda() on ModelNew)."""
    if device == "cpu" or not hasattr(model, "to"):
        return model
    return model.to(device)


def writable_device_paths(device: str) -> list[str]:
    """What the worker must be able to write under Landlock to use ``device`` (landlock.device_writable)."""
    from pragma.tools.launch.landlock import device_writable

    return device_writable(device)


# --- Triton launches ----------------------------------------------------------------------------


class TritonLaunches:
    """Wraps the launch paths of Triton's kernel classes (see the module docstring)."""

    def __init__(self, counter: Any | None, device: str):
        self.counter, self.device = counter, device
        self.side_streams: list[str] = []
        self._expected_stream: Any = None
        self._patched: list[tuple[type, str, Any]] = []  # removed by restore()

    def install(self) -> None:
        from triton.runtime import autotuner, interpreter, jit

        for cls in (jit.JITFunction, interpreter.InterpretedFunction):
            self._wrap(cls, check=True)
        # The autotuner's own benchmarking (events, an L2-flush buffer) is not the candidate's compute.
        self._wrap(autotuner.Autotuner, check=False)
        if os.environ.get("TRITON_INTERPRET") == "1":
            # Every configuration "takes" 0 ms, so min() keeps the first; for the process's lifetime,
            # since a later call with a new autotune key would benchmark again.
            autotuner.Autotuner._bench = lambda tuner, *a, **k: [0.0, 0.0, 0.0]
        if self.counter is not None:
            # The counter's release (after the correctness checks) also removes these wrappers,
            # so the timed calls run Triton's own launch path.
            release = self.counter.release

            def release_all() -> None:
                release()
                self.restore()

            self.counter.release = release_all

    def _wrap(self, cls: type, check: bool) -> None:
        original = cls.__dict__["run"]
        hook = self

        def run(kernel, *args, **kwargs):
            if hook.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
                raise RuntimeError(
                    "Triton kernels need a CUDA device (backend=gpu on a GPU machine), or "
                    "TRITON_INTERPRET=1 to run them on the CPU"
                )
            foreign = check and not kwargs.get("warmup") and hook._foreign_stream(getattr(kernel, "__name__", "kernel"))
            from torch.utils._python_dispatch import _disable_current_modes

            with _disable_current_modes():
                out = original(kernel, *args, **kwargs)
            if foreign:
                # Recorded for no_side_streams; waiting here lets the correctness trials finish, so the
                # verdict names the rule instead of a racy mismatch.
                torch.cuda.synchronize()
            return out

        self._patched.append((cls, "run", original))
        cls.run = run

    def expect_current_stream(self) -> None:
        """Remember the stream the verifier runs on (called before the checks)."""
        if self.device == "cuda":
            self._expected_stream = torch.cuda.current_stream()

    def _foreign_stream(self, name: str) -> bool:
        """True (and recorded) when a launch during the checks is not on the verifier's stream."""
        if self.device != "cuda" or self._expected_stream is None or self.counter is None or not self.counter.active:
            return False
        current = torch.cuda.current_stream()
        if current == self._expected_stream:
            return False
        if len(self.side_streams) < 5:
            self.side_streams.append(
                f"{name} launched on stream {current.cuda_stream:#x}, not the current "
                f"stream {self._expected_stream.cuda_stream:#x}"
            )
        return True

    def restore(self) -> None:
        for cls, name, value in reversed(self._patched):
            setattr(cls, name, value)
        self._patched.clear()


def uses_triton(candidate_source: str) -> bool:
    return "triton" in candidate_source


def install_triton_hook(counter: Any | None, device: str) -> TritonLaunches:
    """Install the launch hook (importing triton now, before the baseline snapshot of the process,
    so triton's own import-time effects are not blamed on the candidate)."""
    hook = TritonLaunches(counter, device)
    hook.install()
    _HOOK[:] = [hook]
    if device == "cuda":
        # Create the CUDA context now: its driver threads must exist before the thread baseline.
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        hook.expect_current_stream()
    return hook


def installed_hook() -> TritonLaunches | None:
    return _HOOK[0] if _HOOK else None


def side_stream_problem(candidate: Callable, inputs: list[Any]) -> str | None:
    """Why the candidate does work outside the current stream, or None.

    Two tests: the launch hook saw a Triton kernel launched on another stream during the checks;
    and an output snapshot taken on the current stream right after forward returns differs from
    the output once the whole device is idle (something else was still writing it).
    """
    from pragma.tools.inside import guards
    from pragma.tools.inside.gpu_timing import _tensors
    from pragma.tools.inside.loading import clone_inputs

    # Here, beside the launch hook, not in gpu_timing.py: gpu_timing then imports nothing of
    # this module (this module imports it for the profiled region).
    hook = installed_hook()
    if hook is not None and hook.side_streams:
        return "; ".join(hook.side_streams)
    args = clone_inputs(inputs)
    with torch.no_grad():
        torch.cuda.synchronize()
        out = candidate(*args)
        snap = [t.clone() if isinstance(t, torch.Tensor) else t for t in _tensors(out)]
        torch.cuda.synchronize()
    for i, (now, then) in enumerate(zip(_tensors(out), snap, strict=True)):
        if isinstance(now, torch.Tensor) and not guards.bitwise_equal(now, then):
            return f"output {i} changed after forward returned: work on another CUDA stream was still writing it"
    return None


# --- profiled region ----------------------------------------------------------------------------


def _kernel_events(prof: Any, calls: int) -> list[dict[str, Any]]:
    """Device kernels from a torch.profiler run, per forward call (microseconds)."""
    rows: dict[str, dict[str, Any]] = {}
    for evt in prof.key_averages():
        device_us = float(getattr(evt, "self_device_time_total", 0.0) or getattr(evt, "self_cuda_time_total", 0.0))
        if device_us <= 0 or getattr(evt, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        row = rows.setdefault(evt.key, {"name": evt.key[:200], "launches": 0, "total_us": 0.0})
        row["launches"] += int(evt.count)
        row["total_us"] += device_us
    out = [
        {
            "name": r["name"],
            "launches_per_call": r["launches"] / max(1, calls),
            "us_per_call": r["total_us"] / max(1, calls),
        }
        for r in rows.values()
    ]
    return sorted(out, key=lambda r: -r["us_per_call"])


def profile_region(
    req: dict[str, Any], workdir: Path, problem: Any, candidate: Any, announce: Callable[[Path, str], None]
) -> dict[str, Any]:
    """Time the candidate with CUDA events, then run ``profile_calls`` calls under the requested
    GPU profiler: ``ncu`` (a cudaProfilerStart/Stop range) or ``torch`` (kernel timings)."""
    from pragma.tools.inside import gpu_timing
    from pragma.tools.inside.loading import seeded_inputs
    from pragma.tools.inside.region import operation_cost

    seed = int(req["seed"])
    inputs = seeded_inputs(problem, seed + 4000)
    calls = int(req["profile_calls"])
    result: dict[str, Any] = {
        "status": "ok",
        "message": "profiled",
        "calls": calls,
        "device": torch.cuda.get_device_name(),
    }
    if req.get("op_cost"):
        try:
            result["op_cost"] = operation_cost(problem, seed, inputs)
        except Exception as exc:  # the roofline is optional; the profile is not
            result["op_cost_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    # The roofline's compute roof depends on the data type the kernel works in.
    result["dtype"] = next(
        (str(x.dtype).replace("torch.", "") for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()),
        "float32",
    )
    with torch.no_grad():
        for _ in range(int(req["warmup_calls"])):
            candidate(*inputs)
        torch.cuda.synchronize()
        # The time per call outside any profiler: CUDA events, L2 flushed, device synchronized.
        result["per_call_ms"] = gpu_timing.median_call_ms(candidate, inputs, repeats=max(5, calls))
        announce(workdir, "profile")
        mode = req.get("gpu_profiler", "ncu")
        t0 = time.perf_counter_ns()
        if mode == "torch":
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    candidate(*inputs)
                torch.cuda.synchronize()
            result["kernels"] = _kernel_events(prof, calls)
        else:
            torch.cuda.profiler.start()
            for _ in range(calls):
                candidate(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        result["region_ms"] = (time.perf_counter_ns() - t0) / 1e6
    result["profiler"] = mode
    return result
