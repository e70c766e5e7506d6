"""CHEATING Triton candidate for problems/add_relu.py: launches on a private CUDA stream and returns
without waiting, so a timer on the current stream stops before the kernel ends. Rejected
statically (no_side_streams); with static checks off, on a GPU, at runtime (the launch hook sees
the foreign stream)."""

import torch
import triton
import triton.language as tl
from torch import nn


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
        self.side = torch.cuda.Stream()

    def forward(self, a, b):
        out = torch.empty_like(a)
        n = a.numel()
        with torch.cuda.stream(self.side):
            add_relu_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
