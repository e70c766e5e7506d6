"""category: normalization — group normalization, 16 groups of 8 channels."""

import torch
from torch import nn

batch = 16
channels = 128
groups = 16
height = 47
width = 45


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return []
