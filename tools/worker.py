"""Runs inside the sandbox for the profiler, the problem probe and prebuilds (``mode`` build: a
kernel's C++ compiled into the build cache): load the problem and a candidate
in one process and measure (it never decides a verdict; verification is ``pragma.tools.judge``,
which keeps candidate code in separate runner processes).

Invoked as ``python -m pragma.tools.worker REQUEST.json``. It announces phases in
``progress.jsonl`` (the parent applies deadlines per phase) and writes ``result.json``.
Before any untrusted code runs it deletes the request file and confines its own writes with
Landlock (and refuses ``flock``: seccomp). It imports ``cext``, ``landlock``, ``seccomp``,
``measure`` and ``region`` from pragma, plus ``gpu_worker`` and ``gpu_timing`` for backend=gpu.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_PHASE = ["start"]  # the last phase announced, reported when something fails


def _announce(workdir: Path, phase: str) -> None:
    _PHASE[0] = phase
    with open(workdir / "progress.jsonl", "a") as f:
        f.write(json.dumps({"phase": phase, "t": time.time()}) + "\n")


def _write_result(workdir: Path, result: dict[str, Any]) -> None:
    tmp = workdir / "result.json.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, workdir / "result.json")


def _import_file(path: str, module_name: str):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _record_load_inline(builds: list[dict[str, Any]], counter=None) -> None:
    """Wrap torch's load_inline so the profiler can find what a KernelBench-style candidate built
    (and the verifier can count calls into it)."""
    import torch.utils.cpp_extension as cpp_ext

    for fn_name in ("load_inline", "load"):
        original = getattr(cpp_ext, fn_name)

        def recording(*args, _original=original, **kwargs):
            module = _original(*args, **kwargs)
            so_path = getattr(module, "__file__", "") or ""
            builds.append(
                {"so_path": so_path, "source_path": str(Path(so_path).parent / "main.cpp"), "kind": "load_inline"}
            )
            if counter is not None:
                counter.inline_modules.add(getattr(module, "__name__", ""))
            return module

        setattr(cpp_ext, fn_name, recording)


def _is_compile_failure(exc: BaseException) -> bool:
    from pragma.tools.cext import CompileError

    if isinstance(exc, (CompileError, SyntaxError)):
        return True
    text = str(exc)
    return "Error building extension" in text or "error:" in text and ".cpp" in text


def _is_memory_failure(exc: BaseException) -> bool:
    text = str(exc)
    return (
        isinstance(exc, MemoryError)
        or "can't allocate memory" in text
        or "bad_alloc" in text
        or "Cannot allocate memory" in text
    )


def _failure(exc: BaseException, req: dict[str, Any], builds: list[dict[str, Any]]) -> dict[str, Any]:
    """Any exception from untrusted code becomes a result, never a crash."""
    status = "compile_error" if _is_compile_failure(exc) else "runtime_error"
    text = str(exc)[-3000:]
    checks = []
    if status == "compile_error":
        # Lead with the compiler's first error, not the "In function ..." context line.
        first = next((ln for ln in text.splitlines() if "error" in ln.lower()), "")
        text = f"{first.strip()}\n{text}" if first else text
    elif _is_memory_failure(exc):
        limit = int(req.get("memory_limit_bytes", 0))
        text = f"memory limit exceeded ({limit} bytes of address space per sandbox): {text}"
        checks = [{"rule": "memory_limit", "verdict": "fail", "detail": text[:300]}]
    return {
        "status": status,
        "message": f"{type(exc).__name__}: {text}",
        "checks": checks,
        "log_tail": traceback.format_exc()[-4000:],
        "builds": builds,
        "failed_phase": _PHASE[0],
    }


def _placed(model, req: dict[str, Any]):
    """KernelBench moves ModelNew to the GPU after constructing it; the verifier does the same."""
    if req.get("device", "cpu") == "cpu":
        return model
    from pragma.tools.gpu_worker import to_device

    return to_device(model, req["device"])


def _build(req: dict[str, Any], workdir: Path, make_baseline=None):
    import torch

    torch.set_num_threads(int(req["num_threads"]))
    _announce(workdir, "load_problem")
    problem = _import_file(req["problem_path"], "pragma_problem")
    if req.get("device", "cpu") != "cpu":  # reference and inputs on the device, as KernelBench puts them
        from pragma.tools.gpu_worker import on_device

        problem = on_device(problem, req["device"])
    seed = int(req["seed"])
    torch.manual_seed(seed)
    init_inputs = list(problem.get_init_inputs())
    torch.manual_seed(seed)
    reference = problem.Model(*init_inputs)
    baseline = make_baseline() if make_baseline else None  # the process before the candidate touches it
    _announce(workdir, "build")
    # Same seed before the candidate's constructor: KernelBench's convention for matching weights.
    torch.manual_seed(seed)
    candidate_module = _import_file(str(workdir / "candidate.py"), "pragma_candidate")
    if not hasattr(candidate_module, "ModelNew"):
        raise AttributeError("candidate defines no class ModelNew")
    torch.manual_seed(seed)
    candidate = _placed(candidate_module.ModelNew(*init_inputs), req)
    return problem, reference, candidate, baseline, init_inputs


def _describe(value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    return {"kind": type(value).__name__, "value": repr(value)[:80]}


def _describe_outputs(out: Any) -> dict[str, Any]:
    many = isinstance(out, (tuple, list))
    return {"container": type(out).__name__ if many else "", "items": [_describe(y) for y in (out if many else [out])]}


def _probe(req: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Load the problem alone: its inputs' shapes and one timed reference call."""
    import torch

    try:
        torch.set_num_threads(int(req["num_threads"]))
        _announce(workdir, "load_problem")
        problem = _import_file(req["problem_path"], "pragma_problem")
        torch.manual_seed(int(req["seed"]))
        init_inputs = list(problem.get_init_inputs())
        model = problem.Model(*init_inputs)
        inputs = list(problem.get_inputs())
        _announce(workdir, "run_reference")
        with torch.no_grad():
            out = model(*inputs)
            # Median of the calls after the first few (at most ~0.6 s of them in all): a fresh
            # process's first calls fault in its heap and huge pages (ReLU at 32 MiB: 5, 6, then 45 ms,
            # then 1.8-2.5 ms steady); one call after one warm-up read 15 ms where the verifier timed
            # the same reference at 2.2 ms.
            samples_ms: list[float] = []
            spent = time.perf_counter()
            while len(samples_ms) < 10 and (len(samples_ms) < 3 or time.perf_counter() - spent < 0.6):
                t0 = time.perf_counter()
                model(*inputs)
                samples_ms.append((time.perf_counter() - t0) * 1e3)
            steady = samples_ms[3:] if len(samples_ms) >= 6 else samples_ms[1:]
            ref_ms = sorted(steady)[len(steady) // 2]
            # Outputs of a second input draw: shapes that differ are data-dependent (kernel-only
            # candidates need fixed output shapes, tools/glue.py).
            torch.manual_seed(int(req["seed"]) + 1)
            out2 = model(*problem.get_inputs())
        return {
            "status": "ok",
            "message": "problem loads",
            "inputs": [_describe(x) for x in inputs],
            "init_inputs": [_describe(x) for x in init_inputs],
            "ref_call_ms": ref_ms,
            "outputs": _describe_outputs(out),
            "outputs_alt": _describe_outputs(out2),
            "state_names": list(model.state_dict())[:20],
            "state": [{"name": n, **_describe(t)} for n, t in list(model.state_dict().items())[:20]],
        }
    except BaseException as exc:
        return {
            "status": "runtime_error",
            "message": f"{type(exc).__name__}: {str(exc)[-2000:]}",
            "log_tail": traceback.format_exc()[-3000:],
        }


def _confine(request_path: str, req: dict[str, Any], workdir: Path) -> dict[str, str]:
    """Forget the request (it holds the held-out seed), fence writes and refuse flock (candidate
    code must not hold the machine's timing slot: tools/seccomp.py); returns what applied."""
    from pragma.tools import landlock, seccomp

    os.unlink(request_path)
    writable = [str(workdir), *req.get("writable_paths", [])]
    if req.get("device", "cpu") == "cuda":  # CUDA opens the GPU's device nodes read-write
        from pragma.tools.gpu_worker import writable_device_paths

        writable += writable_device_paths("cuda")
    return {"filesystem": landlock.confine(writable), "locks": seccomp.deny_flock()}


def main(request_path: str) -> int:
    req = json.loads(Path(request_path).read_text())
    workdir = Path(req["workdir"])
    isolation = _confine(request_path, req, workdir)
    # The allocator of the verifier's runners (tools/spawn.py): the reference time the probe prints
    # at a run's start, and the profiler's per-call figures, agree with the verifier's (the probe
    # read ReLU's reference at 15-16 ms per call where the verifier timed it at 2-3 ms).
    import ctypes

    from pragma.tools.spawn import steady_heap

    steady_heap(ctypes.CDLL(None))
    import pragma.tools.cext as cext

    sys.modules["pragma_cext"] = cext  # candidates import the fast path under this name
    builds: list[dict[str, Any]] = cext.BUILDS
    if req["mode"] == "probe":
        _write_result(workdir, {**_probe(req, workdir), "isolation": isolation})
        return 0
    if req["mode"] == "build":
        # A kernel-format candidate's C++ into the shared build cache, before its verification
        # (a search round's candidates compile in parallel): g++ only, no torch, nothing run.
        try:
            cext.build_cpp(
                str(req["cpp_source"]), tuple(req.get("cpp_flags") or ()), name=str(req["cpp_name"])
            )
            built = {"status": "ok", "message": "built"}
        except Exception as exc:  # the verification reports it in full
            built = {"status": "compile_error", "message": f"{type(exc).__name__}: {str(exc)[-2000:]}"}
        _write_result(workdir, {**built, "builds": builds, "isolation": isolation})
        return 0
    from pragma.tools import region

    counter = None  # verification is the judge's (pragma.tools.judge); this process only profiles
    try:
        if req.get("backend") == "gpu":  # interpreter plumbing, autotune on CPU, stream checks (gpu_worker.py)
            from pragma.tools.gpu_worker import install_triton_hook

            install_triton_hook(counter, req.get("device", "cpu"))  # a CUDA failure here is a result
        _record_load_inline(builds, counter)
        problem, reference, candidate, baseline, init_inputs = _build(req, workdir)
    except BaseException as exc:  # any failure of untrusted code is a result, not a crash
        _write_result(workdir, {**_failure(exc, req, builds), "isolation": isolation})
        return 0
    best_error = ""
    try:
        if req.get("device", "cpu") == "cuda":
            from pragma.tools.gpu_worker import profile_region

            result = profile_region(req, workdir, problem, candidate, _announce)
        else:
            result = region.profile_region(req, workdir, problem, candidate, _announce)
    except BaseException as exc:
        result = _failure(exc, req, builds)
    result["builds"] = builds
    result["isolation"] = isolation
    if req.get("backend") == "gpu":  # where the kernels ran: a CUDA device or the Triton interpreter
        result["device"] = req.get("device_note") or req.get("device", "cpu")
    if best_error:
        result["best_error"] = best_error
    _announce(workdir, "done")
    _write_result(workdir, result)
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown (torch's finalizers cost up to a second on a busy machine); there
    # is nothing to clean up: result.json is written and the parent removes the directory.
    os._exit(status)
