"""Profiler fixture problem: elementwise y = 2.5 * x + 0.5 (memory-bound, trivially vectorizable)."""

import torch
from torch import nn

# 4 MiB in, 4 MiB out: cheap enough for callgrind, odd size so kernels need a remainder loop.
rows = 1024
cols = 1023


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.5 + 0.5


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
