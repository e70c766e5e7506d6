"""Honest: a correct ReLU kernel that uses every kind of glue the rules allow (views, reshape,
empty with explicit dtype, a helper module class, an except branch that re-raises with context,
setup in __init__) and must pass.

problem: relu
expect: ok
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
// Note for readers: no -ffast-math here (it would flip flush-to-zero for the whole process).
extern "C" int relu_forward(const float* x, float* y, int64_t n) {
    if (n < 0) return 1;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
"""

_lib = load_cpp(CPP_SOURCE, extra_flags=("-O3", "-funroll-loops"), name="relu_glue")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = ctypes.c_int


class _Flat(nn.Module):
    """Runs the kernel on a flat view and restores the shape."""

    def __init__(self, lib):
        super().__init__()
        self.lib = lib
        self.calls_expected = 1

    def forward(self, x):
        flat = x.contiguous().view(-1)
        out = torch.empty(flat.shape, dtype=flat.dtype)
        try:
            status = self.lib.relu_forward(ptr(flat), ptr(out), flat.numel())
        except ctypes.ArgumentError as exc:
            raise TypeError(f"kernel arguments rejected: {exc}") from exc
        if status != 0:
            raise RuntimeError(f"kernel failed with status {status}")
        return out.reshape(x.shape)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Flat(_lib)

    def forward(self, x):
        return self.inner(x).view_as(x)
