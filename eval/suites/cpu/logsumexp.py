"""category: pooling/reduction — log-sum-exp over rows."""

import torch
from torch import nn

rows = 3001
cols = 2047


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.logsumexp(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
