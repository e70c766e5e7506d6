"""WRONG Triton candidate for problems/row_softmax.py (the verifier must report a mismatch): the
padding lanes are loaded as 0.0 instead of -inf, so each of the 56 padding lanes adds
exp(0 - row max) to the denominator and every probability comes out too small."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * row_stride + offs, mask=mask, other=0.0)
    num = tl.exp(x - tl.max(x, axis=0))
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
