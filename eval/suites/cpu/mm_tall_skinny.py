"""category: matmul — tall-skinny product: many rows, narrow inner and outer sizes."""

import torch
from torch import nn

rows = 8191
inner = 255
cols = 129


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(rows, inner), torch.randn(inner, cols)]


def get_init_inputs():
    return []
