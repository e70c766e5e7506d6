"""category: matmul — matrix-vector product (memory bound: the matrix is read once)."""

import torch
from torch import nn

rows = 8191
cols = 2049


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, x):
        return torch.mv(a, x)


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(cols)]


def get_init_inputs():
    return []
