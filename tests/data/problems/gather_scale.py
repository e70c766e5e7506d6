"""Kernel-format fixture: an int64 index input, a forward scalar and a constructor scalar; the
output's shape [23, 19] is no input's shape, so the generated module allocates it at a fixed shape."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, idx, shift):
        return x[idx] * self.alpha + shift


def get_inputs():
    return [torch.randn(37, 19), torch.randint(0, 37, (23,)), 3]


def get_init_inputs():
    return [0.5]
