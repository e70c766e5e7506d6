"""Cheat: returns a torch.Tensor subclass that does the work only when someone looks at it, so the
timed call returns immediately.

problem: relu
expect: rejected no_tensor_subclass
runtime-expect: rejected plain_dense_output
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_cpp(CPP_SOURCE, name="relu_lazy")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class Deferred(torch.Tensor):
    """Holds the input; computes the ReLU the first time any torch function touches it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def force(a):
            if isinstance(a, Deferred) and not getattr(a, "done", False):
                src = a.as_subclass(torch.Tensor)
                _lib.relu_forward(ptr(src), ptr(src), src.numel())
                a.done = True
            return a.as_subclass(torch.Tensor) if isinstance(a, Deferred) else a

        args = [force(a) for a in args]
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(out), 0)  # "compiled code ran"
        return x.clone().as_subclass(Deferred)
