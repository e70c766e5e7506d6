"""category: pooling/reduction — index of the minimum along rows (int64 output, exact match)."""

import torch
from torch import nn

rows = 2047
cols = 3001


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmin(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
