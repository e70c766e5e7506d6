"""category: convolution — 1-D convolution, kernel 5, no padding."""

import torch
from torch import nn

batch = 16
in_channels = 32
out_channels = 64
length = 1021


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=5)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, length)]


def get_init_inputs():
    return []
