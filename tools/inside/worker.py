"""Runs inside the sandbox for the profiler, the problem probe and prebuilds (``mode`` build: a
kernel's C++ compiled into the build cache): load the problem and a candidate
in one process and measure (it never decides a verdict; verification is ``pragma.tools.judging.judge``,
which keeps candidate code in separate runner processes).

Invoked as ``python -m pragma.tools.inside.worker REQUEST.json``. It announces phases in
``progress.jsonl`` (the parent applies deadlines per phase) and writes ``result.json``.
Before any untrusted code runs it deletes the request file and confines its own writes with
Landlock (and refuses ``flock``: seccomp). It imports ``cext``, ``landlock``, ``seccomp``,
``loading`` and ``region`` from pragma, plus ``gpu_worker`` and ``gpu_timing`` for backend=gpu.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pragma.tools.inside.loading import import_file, is_compile_failure, is_memory_failure, record_load_inline

_PHASE = ["start"]  # the last phase announced, reported when something fails


def _announce(workdir: Path, phase: str) -> None:
    _PHASE[0] = phase
    with open(workdir / "progress.jsonl", "a") as f:
        f.write(json.dumps({"phase": phase, "t": time.time()}) + "\n")


def _write_result(workdir: Path, result: dict[str, Any]) -> None:
    tmp = workdir / "result.json.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, workdir / "result.json")


def _failure(exc: BaseException, req: dict[str, Any], builds: list[dict[str, Any]]) -> dict[str, Any]:
    """Any exception from untrusted code becomes a result, never a crash."""
    status = "compile_error" if is_compile_failure(exc) else "runtime_error"
    text = str(exc)[-3000:]
    checks = []
    if status == "compile_error":
        # Lead with the compiler's first error, not the "In function ..." context line.
        first = next((ln for ln in text.splitlines() if "error" in ln.lower()), "")
        text = f"{first.strip()}\n{text}" if first else text
    elif is_memory_failure(exc):
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
    from pragma.tools.inside.gpu_worker import to_device

    return to_device(model, req["device"])


def _build(req: dict[str, Any], workdir: Path, make_baseline=None):
    import torch

    torch.set_num_threads(int(req["num_threads"]))
    _announce(workdir, "load_problem")
    problem = import_file(req["problem_path"], "pragma_problem")
    if req.get("device", "cpu") != "cpu":  # reference and inputs on the device, as KernelBench puts them
        from pragma.tools.inside.gpu_worker import on_device

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
    candidate_module = import_file(str(workdir / "candidate.py"), "pragma_candidate")
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


# The probe's reference time, printed at a run's start, is taken the way the verifier's judge
# times the reference (tools/judging/judge.py): same thread count and allocator (steady_heap, in main, and
# the sandbox's huge-page setting), the previous output dropped before each call, warm-up by count
# then until two windows of calls agree, the median of several calls, all inside the machine's
# timing slot. The verifier's reference runner has made dozens of calls (correctness trials) before
# its first timed one; the probe has made one, so its warm-up also lasts until calls stop faulting
# pages in. A 64 MiB KernelBench-style ReLU read 185 ms per call here while the verifier timed it at
# 5.6 ms: under load its first 16 calls each took 544 page faults (2 MiB-aligned huge-page
# allocations compacted on fault) and ~145 ms, then 0 faults and 5 ms.
PROBE_WARMUP_WINDOW = 5  # calls per window of the settle test (the judge's WARMUP_WINDOW)
PROBE_WARMUP_SETTLED = 0.03  # two windows' medians within 3% (the judge's WARMUP_SETTLED)
PROBE_WARMUP_FAULTS_PER_CALL = 8  # minor page faults per call that still count as steady
PROBE_WARMUP_MAX_S = 5.0  # warm-up waiting for faults to stop ends here (a reference may fault forever)
PROBE_TIMED_MIN_CALLS = 10
PROBE_TIMED_MAX_CALLS = 50
PROBE_TIMED_MIN_S = 0.25  # timed calls continue past PROBE_TIMED_MIN_CALLS until this much time passed


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _settled(call_ms: list[float]) -> bool:
    if len(call_ms) < 2 * PROBE_WARMUP_WINDOW:
        return False
    last = _median(call_ms[-PROBE_WARMUP_WINDOW:])
    before = _median(call_ms[-2 * PROBE_WARMUP_WINDOW : -PROBE_WARMUP_WINDOW])
    return before > 0 and abs(last - before) <= PROBE_WARMUP_SETTLED * before


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # every thread of the process


def steady_call_ms(
    call, *, warmup_calls: int = 5, warmup_s: float = 0.5, between=None, min_calls: int = PROBE_TIMED_MIN_CALLS
) -> dict[str, Any]:
    """Median wall time of ``call()`` once warm. Warm-up: ``warmup_calls`` calls, then more until two
    windows of calls agree or ``warmup_s`` passed, and in any case (up to PROBE_WARMUP_MAX_S) until the
    last window of calls took at most PROBE_WARMUP_FAULTS_PER_CALL page faults each. Then at least
    ``min_calls`` timed calls and PROBE_TIMED_MIN_S, at most max(``min_calls``, PROBE_TIMED_MAX_CALLS). Each
    call's result is dropped before the next call starts, as the verifier's runners drop their
    previous output. ``between()``, when given, runs before each timed call, outside its time."""
    warm: list[float] = []
    faults: list[int] = []
    start = time.perf_counter()

    def faulting() -> bool:
        recent = faults[-PROBE_WARMUP_WINDOW:]
        return bool(recent) and max(recent) > PROBE_WARMUP_FAULTS_PER_CALL

    while True:
        elapsed_s = time.perf_counter() - start
        if len(warm) >= warmup_calls and (elapsed_s >= warmup_s or _settled(warm)):
            if not faulting() or elapsed_s >= PROBE_WARMUP_MAX_S:
                break
        f0 = _minor_faults()
        t0 = time.perf_counter()
        call()
        warm.append((time.perf_counter() - t0) * 1e3)
        faults.append(_minor_faults() - f0)
    warmup_elapsed_s = time.perf_counter() - start
    samples: list[float] = []
    sample_faults: list[int] = []
    start = time.perf_counter()
    while len(samples) < max(min_calls, PROBE_TIMED_MAX_CALLS) and (
        len(samples) < min_calls
        or time.perf_counter() - start < PROBE_TIMED_MIN_S
        # Still faulting after the warm-up's cap: time more calls (up to 5 s more) for steady ones.
        or (
            time.perf_counter() - start < PROBE_WARMUP_MAX_S
            and sum(f <= PROBE_WARMUP_FAULTS_PER_CALL for f in sample_faults) < max(3, min_calls // 2)
        )
    ):
        if between is not None:
            between()
        f0 = _minor_faults()
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1e3)
        sample_faults.append(_minor_faults() - f0)
    # The verifier's reference runner times a process long past its heap's growth. When calls of the
    # probe's still fault (under load a 64 MiB ReLU kept faulting ~400 pages a call, ~500 ms, past a
    # 5 s warm-up, against 7-25 ms in the verifier at the same time), the figure is the median of the
    # calls that did not, if there are enough of them; ``faulting_calls`` says how many were left out.
    steady = [ms for ms, f in zip(samples, sample_faults, strict=True) if f <= PROBE_WARMUP_FAULTS_PER_CALL]
    kept = steady if len(steady) >= max(3, min_calls // 2) else samples
    return {
        "median_ms": _median(kept),
        "min_ms": min(samples),
        "samples": len(kept),
        "faulting_calls": len(samples) - len(steady),
        "warmup_calls": len(warm),
        "warmup_elapsed_s": round(warmup_elapsed_s, 3),
        "faults_per_timed_call": round(sum(sample_faults) / len(samples), 1),
    }


def flush_bytes() -> int:
    """Twice the last-level cache (32 MiB when sysfs does not say)."""
    from pragma.tools import hardware

    llc = hardware.last_level_cache(hardware.cpu_spec())
    return 2 * (llc["size_bytes"] if llc else 32 * 2**20)


def _probe(req: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Load the problem alone: its inputs' shapes and the reference's steady time per call."""
    from pragma.tools.launch import startup, timing_slot

    with startup.imports():
        import torch

    try:
        torch.set_num_threads(int(req["num_threads"]))
        _announce(workdir, "load_problem")
        problem = import_file(req["problem_path"], "pragma_problem")
        torch.manual_seed(int(req["seed"]))
        init_inputs = list(problem.get_init_inputs())
        model = problem.Model(*init_inputs)
        inputs = list(problem.get_inputs())
        # The verifier times the reference between other implementations' calls and input changes,
        # which leave little of its data in the last-level cache; the probe reads a buffer twice the
        # LLC's size before each timed call for the same state (allocated before any call: a buffer
        # allocated later made a kernel's fresh outputs fault, tools/inside/region.py). Without it a 16 MB
        # ReLU read 0.66 ms here (input and output in the 32 MiB L3) where the verifier read 2-2.5 ms.
        scratch = torch.ones(flush_bytes() // 4)
        _announce(workdir, "run_reference")
        with torch.no_grad():
            out = model(*inputs)
            outputs = _describe_outputs(out)
            del out  # the verifier's runners hold no earlier output while a call runs
            with timing_slot.hold("problem probe") as slot:
                timing = steady_call_ms(
                    lambda: model(*inputs),
                    warmup_calls=int(req.get("warmup_calls", 5)),
                    warmup_s=float(req.get("warmup_s", 0.5)),
                    between=lambda: float(scratch.sum()),
                )
            # Outputs of a second input draw: shapes that differ are data-dependent (kernel-only
            # candidates need fixed output shapes, tools/glue.py).
            torch.manual_seed(int(req["seed"]) + 1)
            out2 = model(*problem.get_inputs())
        return {
            "status": "ok",
            "message": "problem loads",
            "inputs": [_describe(x) for x in inputs],
            "init_inputs": [_describe(x) for x in init_inputs],
            "ref_call_ms": timing["median_ms"],
            "ref_call_timing": {**timing, "timing_slot_waited_s": slot["waited_s"]},
            "outputs": outputs,
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
    code must not hold the machine's timing slot: tools/launch/seccomp.py); returns what applied."""
    from pragma.tools.launch import landlock, seccomp

    os.unlink(request_path)
    writable = [str(workdir), *req.get("writable_paths", [])]
    if req.get("device", "cpu") == "cuda":  # CUDA opens the GPU's device nodes read-write
        from pragma.tools.inside.gpu_worker import writable_device_paths

        writable += writable_device_paths("cuda")
    # The probe runs only the problem's own Model (like the verifier's reference runner, which keeps
    # flock for torch.compile's file locks) and takes the timing slot around its timed calls.
    filesystem = landlock.confine(writable)
    locks = "none: the problem probe runs no candidate code" if req["mode"] == "probe" else seccomp.deny_flock()
    return {"filesystem": filesystem, "locks": locks}


def main(request_path: str) -> int:
    req = json.loads(Path(request_path).read_text())
    workdir = Path(req["workdir"])
    isolation = _confine(request_path, req, workdir)
    # The allocator of the verifier's runners (tools/launch/spawn.py): the reference time the probe prints
    # at a run's start, and the profiler's per-call figures, agree with the verifier's (the probe
    # read ReLU's reference at 15-16 ms per call where the verifier timed it at 2-3 ms).
    import ctypes

    from pragma.tools.launch.spawn import steady_heap

    steady_heap(ctypes.CDLL(None))
    import pragma.tools.inside.cext as cext

    sys.modules["pragma_cext"] = cext  # candidates import the fast path under this name
    builds: list[dict[str, Any]] = cext.BUILDS
    if req["mode"] == "probe":
        _write_result(workdir, {**_probe(req, workdir), "isolation": isolation})
        return 0
    if req["mode"] == "build":
        # A kernel-format candidate's C++ into the shared build cache, before its verification
        # (a search round's candidates compile in parallel): g++ only, no torch, nothing run.
        try:
            cext.build_cpp(str(req["cpp_source"]), tuple(req.get("cpp_flags") or ()), name=str(req["cpp_name"]))
            built = {"status": "ok", "message": "built"}
        except Exception as exc:  # the verification reports it in full
            built = {"status": "compile_error", "message": f"{type(exc).__name__}: {str(exc)[-2000:]}"}
        _write_result(workdir, {**built, "builds": builds, "isolation": isolation})
        return 0
    from pragma.tools.launch import startup

    with startup.imports():  # torch and the profiling code, with no collection while they load
        from pragma.tools.inside import region

    counter = None  # verification is the judge's (pragma.tools.judging.judge); this process only profiles
    try:
        if req.get("backend") == "gpu":  # interpreter plumbing, autotune on CPU, stream checks (gpu_worker.py)
            from pragma.tools.inside.gpu_worker import install_triton_hook

            install_triton_hook(counter, req.get("device", "cpu"))  # a CUDA failure here is a result
        record_load_inline(builds, counter)
        problem, reference, candidate, baseline, init_inputs = _build(req, workdir)
    except BaseException as exc:  # any failure of untrusted code is a result, not a crash
        _write_result(workdir, {**_failure(exc, req, builds), "isolation": isolation})
        return 0
    best_error = ""
    try:
        if req.get("device", "cpu") == "cuda":
            from pragma.tools.inside.gpu_worker import profile_region

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
