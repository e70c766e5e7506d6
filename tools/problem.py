"""The problem contract: a KernelBench-format file with ``Model``, ``get_inputs``, ``get_init_inputs``.

``load_problem`` checks the file statically (it must parse and define the three names), then
loads it once in the sandbox to describe its inputs. Any failure is a ``ProblemError`` with a
one-line message: the CLI turns it into exit code 2.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from pragma.tools.launch import sandbox, timing_slot

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class ProblemError(Exception):
    """The problem file is missing, unreadable or does not follow the KernelBench contract."""


def check_source(source: str, label: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ProblemError(f"{label}: Python syntax error at line {exc.lineno}: {exc.msg}") from None
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
    }
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise ProblemError(f"{label}: not a KernelBench problem, missing {', '.join(missing)}")


def read_problem(path: str | Path) -> dict[str, Any]:
    """Static part of loading: read and check the file. No code runs."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ProblemError(f"problem file not found: {p}")
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"cannot read problem file {p}: {exc}") from None
    check_source(source, str(p))
    return {"path": str(p.resolve()), "name": p.stem, "source": source}


def probe_problem(
    problem: dict[str, Any],
    *,
    num_threads: int = 1,
    seed: int = 1234,
    warmup_calls: int = 5,
    warmup_s: float = 0.5,
    timeout_s: float = 300.0,
    memory_limit_bytes: int = 8 * 2**30,
) -> dict[str, Any]:
    """Load the problem in the sandbox; returns it with ``inputs``/``init_inputs`` descriptions and
    ``ref_call_ms``, the reference's time per call taken as the verifier takes it (warm-up until
    settled, median of 10-50 calls, inside the machine's timing slot: tools/inside/worker.py)."""
    # The probe holds the timing slot around its timed calls; inside the sandbox it may only open
    # the slot's file read-only, so the file is created here first.
    timing_slot.ensure_file()
    request = {
        "mode": "probe",
        "problem_path": problem["path"],
        "num_threads": num_threads,
        "seed": seed,
        "warmup_calls": warmup_calls,
        "warmup_s": warmup_s,
    }
    outcome = sandbox.run_worker(
        request,
        compile_timeout_s=timeout_s,
        run_timeout_s=timeout_s,
        memory_limit_bytes=memory_limit_bytes,
        num_threads=num_threads,
    )
    res = outcome.result
    if outcome.timed_out_phase:
        raise ProblemError(f"{problem['path']}: loading the reference took longer than {timeout_s:.0f} s")
    if res is None:
        why = f"died with {outcome.signal_name}" if outcome.signal_name else f"exit code {outcome.exit_code}"
        raise ProblemError(f"{problem['path']}: the reference could not be run ({why})")
    if res.get("status") != "ok":
        raise ProblemError(f"{problem['path']}: the reference fails: {res.get('message', '').splitlines()[-1:]}")
    # outputs/outputs_alt/state_names describe what forward returns (two input draws) and the
    # reference's parameters and buffers: tools/glue.py decides from them whether a kernel-only
    # candidate can be wrapped. A worker without them (older) simply means "module" format.
    extra = {k: res[k] for k in ("outputs", "outputs_alt", "state_names", "state") if k in res}
    return {
        **problem,
        "inputs": res["inputs"],
        "init_inputs": res["init_inputs"],
        "ref_call_ms": res["ref_call_ms"],
        **({"ref_call_timing": res["ref_call_timing"]} if "ref_call_timing" in res else {}),
        **extra,
    }


def load_problem(path: str | Path, **probe_kwargs: Any) -> dict[str, Any]:
    return probe_problem(read_problem(path), **probe_kwargs)
