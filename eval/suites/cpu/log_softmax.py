"""category: normalization — log-softmax over rows."""

import torch
from torch import nn

rows = 2001
cols = 2999


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
