"""The share of non-negative entries (one scalar). On torch.rand inputs it is exactly 1.0 every
time, so the problem's own inputs cannot tell a kernel from the constant 1.0: only inputs with
other signs can (the stress variants), which is what makes this problem decidable."""

import torch
from torch import nn

batch_size = 64
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x >= 0).float().mean()


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
