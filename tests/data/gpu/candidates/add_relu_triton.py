"""Honest Triton candidate for problems/add_relu.py: one masked pass, two autotune configurations
(under TRITON_INTERPRET=1 the verifier uses the first; on a GPU the autotuner times both)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8)],
    key=["n"],
)
@triton.jit
def add_relu_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(a + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_relu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](a, b, out, n)
        return out
