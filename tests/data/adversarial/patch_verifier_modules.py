"""Cheat: reaches PRAGMA's own measuring code from inside the candidate's process, through
sys.modules and the worker's __main__ module (the verifier v1 hole: comparison and timing ran
in the candidate's interpreter), and replaces every comparison with "equal" and every clock with
one that runs ten times slower for the reference. The kernel itself is a copy (wrong on randn).
Since v2 nothing that judges runs in this process: the patches land on nothing that decides.

problem: relu
expect: rejected no_introspection
runtime-expect: mismatch
"""

import ctypes
import sys

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

_lib = load_cpp(
    r"""
#include <cstdint>
#include <cstring>
extern "C" void copy(const float* x, float* y, int64_t n) { std::memcpy(y, x, sizeof(float) * n); }
""",
    name="patch_modules_copy",
)
_lib.copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.copy.restype = None


def _always_equal(*args, **kwargs):
    return {"ok": True, "max_abs_diff": 0.0, "mean_abs_diff": 0.0, "message": "outputs match"}


_patched = []
for _name, _mod in list(sys.modules.items()):
    if _mod is None or not (_name.startswith("pragma") or _name == "__main__"):
        continue
    for _attr in (
        "compare",
        "bitwise_equal",
        "degenerate_tolerance",
        "allclose",
        "isclose",
        "perf_counter",
        "perf_counter_ns",
        "judge",
        "decide",
    ):
        if hasattr(_mod, _attr):
            setattr(_mod, _attr, _always_equal)
            _patched.append(f"{_name}.{_attr}")
print("PATCHED", _patched, flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.copy(ptr(x), ptr(y), x.numel())
        return y
