"""Runs inside the sandbox: load the problem and a candidate, check, time or profile it.

Invoked as ``python -m pragma.tools.worker REQUEST.json``. It announces phases in
``progress.jsonl`` (the parent applies deadlines per phase) and writes ``result.json``.
It imports only ``cext``, ``measure`` and ``region`` from pragma, so untrusted code meets a small surface.
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


def _record_load_inline(builds: list[dict[str, Any]]) -> None:
    """Wrap torch's load_inline so the profiler can find what a KernelBench-style candidate built."""
    import torch.utils.cpp_extension as cpp_ext

    original = cpp_ext.load_inline

    def recording_load_inline(*args, **kwargs):
        module = original(*args, **kwargs)
        so_path = getattr(module, "__file__", "") or ""
        builds.append(
            {"so_path": so_path, "source_path": str(Path(so_path).parent / "main.cpp"), "kind": "load_inline"}
        )
        return module

    cpp_ext.load_inline = recording_load_inline


def _is_compile_failure(exc: BaseException) -> bool:
    from pragma.tools.cext import CompileError

    if isinstance(exc, (CompileError, SyntaxError)):
        return True
    text = str(exc)
    return "Error building extension" in text or "error:" in text and ".cpp" in text


def _build(req: dict[str, Any], workdir: Path):
    import torch

    torch.set_num_threads(int(req["num_threads"]))
    _announce(workdir, "load_problem")
    problem = _import_file(req["problem_path"], "pragma_problem")
    seed = int(req["seed"])
    torch.manual_seed(seed)
    init_inputs = list(problem.get_init_inputs())
    torch.manual_seed(seed)
    reference = problem.Model(*init_inputs)
    _announce(workdir, "build")
    # Same seed before the candidate's constructor: KernelBench's convention for matching weights.
    torch.manual_seed(seed)
    candidate_module = _import_file(str(workdir / "candidate.py"), "pragma_candidate")
    if not hasattr(candidate_module, "ModelNew"):
        raise AttributeError("candidate defines no class ModelNew")
    torch.manual_seed(seed)
    candidate = candidate_module.ModelNew(*init_inputs)
    return problem, reference, candidate


def _describe(value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    return {"kind": type(value).__name__, "value": repr(value)[:80]}


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
            model(*inputs)
            t0 = time.perf_counter()
            model(*inputs)
            ref_ms = (time.perf_counter() - t0) * 1e3
        return {"status": "ok", "message": "problem loads", "inputs": [_describe(x) for x in inputs],
                "init_inputs": [_describe(x) for x in init_inputs], "ref_call_ms": ref_ms}
    except BaseException as exc:
        return {"status": "runtime_error", "message": f"{type(exc).__name__}: {str(exc)[-2000:]}",
                "log_tail": traceback.format_exc()[-3000:]}


def main(request_path: str) -> int:
    req = json.loads(Path(request_path).read_text())
    workdir = Path(req["workdir"])
    import pragma.tools.cext as cext

    sys.modules["pragma_cext"] = cext  # candidates import the fast path under this name
    builds: list[dict[str, Any]] = cext.BUILDS
    if req["mode"] == "probe":
        _write_result(workdir, _probe(req, workdir))
        return 0
    try:
        _record_load_inline(builds)
        problem, reference, candidate = _build(req, workdir)
    except BaseException as exc:  # any failure of untrusted code is a result, not a crash
        status = "compile_error" if _is_compile_failure(exc) else "runtime_error"
        text = str(exc)[-3000:]
        if status == "compile_error":
            # Lead with the compiler's first error, not the "In function ..." context line.
            first = next((ln for ln in text.splitlines() if "error" in ln.lower()), "")
            text = f"{first.strip()}\n{text}" if first else text
        _write_result(
            workdir,
            {"status": status, "message": f"{type(exc).__name__}: {text}",
             "log_tail": traceback.format_exc()[-4000:], "builds": builds, "failed_phase": _PHASE[0]},
        )
        return 0
    from pragma.tools import measure, region

    try:
        if req["mode"] == "verify":
            result = measure.verify(req, workdir, problem, reference, candidate, _announce)
        else:
            result = region.profile_region(req, workdir, problem, candidate, _announce)
    except BaseException as exc:
        result = {"status": "runtime_error", "message": f"{type(exc).__name__}: {str(exc)[-3000:]}",
                  "log_tail": traceback.format_exc()[-4000:]}
    result["builds"] = builds
    _announce(workdir, "done")
    _write_result(workdir, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
