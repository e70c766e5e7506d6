"""Inclusive prefix sum along rows (KernelBench level 1, 89_cumsum) at its own size, inputs from
torch.rand. torch accumulates a float prefix sum in double on the CPU; a plain fp32 running sum
rounds at every step, and on mixed signs the running sums cancel while the rounding does not."""

import torch
from torch import nn

batch_size = 128
length = 4000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.rand(batch_size, length)]


def get_init_inputs():
    return []
