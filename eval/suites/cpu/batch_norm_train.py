"""category: normalization — 2-D batch normalization in training mode (batch statistics)."""

import torch
from torch import nn

# The module stays in training mode (as KernelBench leaves it): the output uses the batch's own
# mean and biased variance; the running-stat update is a side effect nobody checks.
batch = 32
channels = 32
height = 47
width = 45


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return []
