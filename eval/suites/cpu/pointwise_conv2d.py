"""category: convolution — 1x1 convolution mixing channels."""

import torch
from torch import nn

batch = 16
in_channels = 64
out_channels = 96
height = 41
width = 43


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return []
