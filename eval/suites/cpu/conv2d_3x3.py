"""category: convolution — 3x3 convolution, padding 1, with bias."""

import torch
from torch import nn

batch = 16
in_channels = 16
out_channels = 32
height = 63
width = 61


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return []
