"""Runtime anti-cheat that runs inside the candidate's own process (advisory: the candidate could lie).

Watch what the candidate does when it is loaded and called; the runner reports the findings and
the judge turns them into verdicts.

Only the worker imports this module, and it does so before the candidate is imported, so the
snapshots below describe the process as the verifier left it. Rule names and rationales are in
``anticheat.RULES``; this module only measures and returns (rule, detail) findings.
"""

from __future__ import annotations

import builtins
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional
from torch.utils._python_dispatch import TorchDispatchMode

from pragma.tools.wire.tensors import bitwise_equal, tensors_of  # noqa: F401 (callers use them from here)

# aten ops a forward may dispatch without computing the operator: allocation, views, copies.
GLUE_OPS = frozenset(
    """
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
ones_like new_ones full full_like new_full fill_ zero_ lift_fresh lift_fresh_copy clone copy_
_to_copy view _unsafe_view _reshape_alias reshape as_strided t transpose permute expand squeeze
unsqueeze select slice narrow unbind split split_with_sizes chunk alias detach view_as unflatten
flatten contiguous resize_ is_contiguous sym_size sym_stride sym_numel sym_storage_offset
_local_scalar_dense
""".split()
)
_LOW_PRECISION = (torch.float16, torch.bfloat16)

# Process-wide objects whose attributes a candidate could replace to fool timing or comparison.
_PATCH_TARGETS: dict[str, Any] = {
    "time": time,
    "torch": torch,
    "torch.nn.functional": torch.nn.functional,
    "builtins": builtins,
    "math": math,
    "torch.Tensor": torch.Tensor,
    "torch._C.TensorBase": torch._C.TensorBase,
    "torch.nn.Module": torch.nn.Module,
}


def _os_thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def child_pids() -> list[int]:
    """Processes this process started that are still alive (zombies included)."""
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


def denormals_preserved() -> bool:
    """False when flush-to-zero or denormals-are-zero is on (crtfastmath, set_flush_denormal)."""
    tiny = float.fromhex("0x1p-1040")  # a double subnormal, built at runtime so nothing folds it
    python_ok = tiny * float("1.5") != 0.0
    torch_ok = bool((torch.full((4,), 1e-39, dtype=torch.float32) * 1.5).ne(0).all())
    return python_ok and torch_ok


class Baseline:
    """The process as the verifier left it, before the candidate was imported."""

    def __init__(self, num_threads: int):
        self.num_threads = num_threads
        self.patchable = {
            (label, key): value for label, obj in _PATCH_TARGETS.items() for key, value in list(vars(obj).items())
        }
        self.py_threads = set(threading.enumerate())
        self.os_threads = _os_thread_count()
        self.fp_ok = denormals_preserved()

    def patched(self) -> list[str]:
        changed = []
        for (label, key), value in self.patchable.items():
            now = vars(_PATCH_TARGETS[label]).get(key, _MISSING)
            if now is not value:
                changed.append(f"{label}.{key}")
        return changed

    def findings(self, os_thread_allowance: int) -> list[tuple[str, str]]:
        """Process-level rules: patches, fp environment, threads and children."""
        found = []
        if patched := self.patched():
            found.append(("no_monkeypatching", f"replaced {', '.join(patched[:5])}"))
        if self.fp_ok and not denormals_preserved():
            found.append(("fp_environment", "denormals are now flushed to zero (FTZ/DAZ turned on)"))
        if torch.get_num_threads() != self.num_threads:
            found.append(
                ("thread_budget", f"torch uses {torch.get_num_threads()} threads, the verifier set {self.num_threads}")
            )
        extra_py = [t.name for t in threading.enumerate() if t not in self.py_threads and t.is_alive()]
        if extra_py:
            found.append(("no_threads_or_processes", f"Python threads still running: {', '.join(extra_py[:5])}"))
        grown = _os_thread_count() - self.os_threads
        if grown > os_thread_allowance:
            found.append(
                (
                    "thread_budget",
                    f"{grown} more OS threads than before the candidate loaded "
                    f"(allowed {os_thread_allowance} at num_threads={self.num_threads})",
                )
            )
        if kids := child_pids():
            found.append(("no_threads_or_processes", f"{len(kids)} child process(es) alive after the call"))
        return found


_MISSING = object()


class OpRecorder(TorchDispatchMode):
    """Records every aten op dispatched while active (including ops C++ extensions call)."""

    def __init__(self) -> None:
        super().__init__()
        self.compute: list[str] = []
        self.downcasts: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name not in GLUE_OPS:
            self.compute.append(str(func))
        elif name == "_to_copy" and kwargs.get("dtype") in _LOW_PRECISION:
            source = args[0].dtype if args and isinstance(args[0], torch.Tensor) else None
            if source not in _LOW_PRECISION:
                self.downcasts.append(f"{source} -> {kwargs['dtype']}")
        return func(*args, **kwargs)


def prime() -> None:
    """Run the lazy imports a dispatch mode triggers (they rewrap torch.manual_seed) now, so the
    baseline snapshot sees torch as it will stay."""
    with OpRecorder():
        torch.empty(1)


class CallCounter:
    """Counts calls into the candidate's own compiled code while ``counting()`` is active.

    ctypes libraries from ``load_cpp`` get a counting function-pointer class; after the checks
    ``release()`` turns every function back into the plain class, so timed calls pay nothing.
    load_inline/load modules are pybind11 builtins: a profile hook sees them as C calls.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.active = False
        self.inline_modules: set[str] = set()
        self._libs: list[tuple[Any, type]] = []

    def instrument(self, lib: Any) -> Any:
        base = lib._FuncPtr
        counter = self

        def __call__(fn, *args):
            if counter.active:
                counter.calls += 1
            return base.__call__(fn, *args)

        lib._FuncPtr = type(
            "CountingFuncPtr", (base,), {"__call__": __call__, "_flags_": base._flags_, "_restype_": base._restype_}
        )
        self._libs.append((lib, base))
        return lib

    def wrap_cext(self, cext_module: Any) -> None:
        original = cext_module.load_cpp

        def load_cpp(source, extra_flags=(), name="kernel"):
            return self.instrument(original(source, extra_flags, name))

        load_cpp.__doc__ = original.__doc__
        cext_module.load_cpp = load_cpp

    def wrap_triton(self) -> None:
        """Count Triton kernel launches (backend=gpu): compiled and interpreted (TRITON_INTERPRET=1)."""
        import importlib

        counter = self
        for module_name, class_name in (
            ("triton.runtime.jit", "JITFunction"),
            ("triton.runtime.interpreter", "InterpretedFunction"),
        ):
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
            except (ImportError, AttributeError):
                continue
            original = cls.run

            def run(fn, *args, _original=original, **kwargs):
                if counter.active:
                    counter.calls += 1
                return _original(fn, *args, **kwargs)

            cls.run = run

    def _profile(self, frame, event, arg) -> None:
        if event == "c_call" and getattr(arg, "__module__", None) in self.inline_modules:
            self.calls += 1

    @contextmanager
    def counting(self) -> Iterator[None]:
        self.active = True
        hook = bool(self.inline_modules)
        if hook:
            sys.setprofile(self._profile)
        try:
            yield
        finally:
            if hook:
                sys.setprofile(None)
            self.active = False

    def release(self) -> None:
        for lib, base in self._libs:
            lib._FuncPtr = base
            for value in list(vars(lib).values()):
                if isinstance(value, base) and type(value) is not base:
                    value.__class__ = base


def output_form_problem(t: Any) -> str | None:
    """Why ``t`` is not a plain dense tensor, or None."""
    if type(t) is not torch.Tensor:
        return f"output is {type(t).__module__}.{type(t).__qualname__}, not torch.Tensor"
    if t.layout != torch.strided:
        return f"output layout is {t.layout}"
    if t.is_conj() or t.is_neg():
        return "output carries a lazy conjugate/negative bit"
    if t.device.type == "meta":
        return "output is a meta tensor (no data)"
    return None


def _span(t: torch.Tensor) -> tuple[int, int] | None:
    if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.device.type == "meta":
        return None
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return (start, start + storage.nbytes()) if storage.nbytes() else None


def overlaps(a: Any, b: Any) -> bool:
    sa, sb = _span(a), _span(b)
    return bool(sa and sb and sa[0] < sb[1] and sb[0] < sa[1])


def snapshot(out: Any) -> list[Any]:
    return [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in tensors_of(out)]


def same_as_snapshot(out: Any, snap: list[Any]) -> bool:
    now = tensors_of(out)
    return len(now) == len(snap) and all(bitwise_equal(a, b) for a, b in zip(now, snap, strict=True))
