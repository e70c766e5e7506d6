"""Loading the problem and an implementation in a process beside candidate code: shared by the
judge's runners (``runner.py``) and the profiler's worker (``worker.py``, ``region.py``,
``gpu_worker.py``), which load the same files the same way.

Inside code only: nothing here compares or decides (the comparison is the judge's,
``judging/compare.py``, which no process that runs candidate code imports).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

# torch is imported where it is used: the worker imports this module before it needs torch (its
# build mode never does), as it imported its own copy of these functions before.
if TYPE_CHECKING:
    from pragma.tools.inside.guards import CallCounter


def import_file(path: str, module_name: str):
    """Import the file at ``path`` as ``module_name`` (registered in ``sys.modules`` first, so the
    module's own imports of that name, and pickling, find it)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def record_load_inline(builds: list[dict[str, Any]], counter: CallCounter | None = None) -> None:
    """Wrap torch's load_inline/load so the profiler finds what a KernelBench-style candidate built
    (and calls into it are counted when a ``counter`` is given)."""
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


def is_compile_failure(exc: BaseException) -> bool:
    from pragma.tools.inside.cext import CompileError

    if isinstance(exc, (CompileError, SyntaxError)):
        return True
    text = str(exc)
    return "Error building extension" in text or "error:" in text and ".cpp" in text


def is_memory_failure(exc: BaseException) -> bool:
    text = str(exc)
    return (
        isinstance(exc, MemoryError)
        or "can't allocate memory" in text
        or "bad_alloc" in text
        or "Cannot allocate memory" in text
    )


def clone_inputs(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def seeded_inputs(problem, seed: int) -> list[Any]:
    """The problem's ``get_inputs()`` under torch's global seed ``seed``."""
    import torch

    torch.manual_seed(seed)
    return list(problem.get_inputs())
