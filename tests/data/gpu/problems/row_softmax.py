"""Tiny GPU-suite problem: softmax over the last dimension of an 8 x 200 matrix (200 columns is
not a power of two: a block of 256 lanes has 56 padding lanes that must not count)."""

import torch
from torch import nn

rows, cols = 8, 200


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
