"""Honest Triton candidate for problems/row_softmax.py: one program per row, the whole row in one
block, padding lanes loaded as -inf so they add exp(-inf) = 0 to the sum; fp32 throughout."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * row_stride + offs, mask=mask, other=-float("inf"))
    shifted = x - tl.max(x, axis=0)
    num = tl.exp(shifted)
    tl.store(out_ptr + row * row_stride + offs, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return out
