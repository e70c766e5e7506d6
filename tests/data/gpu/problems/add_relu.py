"""Tiny GPU-suite problem: ReLU(a + b). 3000 elements, not a multiple of any block size, so
kernels must mask their tail; small enough for Triton's CPU interpreter in CI."""

import torch
from torch import nn

n = 3000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
