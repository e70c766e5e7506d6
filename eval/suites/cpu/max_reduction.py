"""category: pooling/reduction — maximum over the second dimension (values only)."""

import torch
from torch import nn

rows = 2049
cols = 4001


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.max(x, dim=1).values


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
