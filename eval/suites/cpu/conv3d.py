"""category: convolution — 3x3x3 volumetric convolution, no padding."""

import torch
from torch import nn

batch = 4
in_channels = 8
out_channels = 16
depth = 31
height = 29
width = 31


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, depth, height, width)]


def get_init_inputs():
    return []
