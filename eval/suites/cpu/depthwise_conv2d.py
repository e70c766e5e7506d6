"""category: convolution — depthwise 3x3 convolution (one filter per channel)."""

import torch
from torch import nn

batch = 8
channels = 64
height = 65
width = 63


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return []
