"""Profiler fixture problem: column sums of a row-major matrix, y[j] = sum_i x[i, j].

A kernel can walk x row by row (contiguous, every cache line used whole) or column by column
(stride of one row, 8 KiB: every load touches a new line), with the same arithmetic.
"""

import torch
from torch import nn

rows = 2048
cols = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=0)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
