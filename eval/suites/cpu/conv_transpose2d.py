"""category: convolution — transposed 4x4 convolution, stride 2, padding 1 (2x upsampling)."""

import torch
from torch import nn

batch = 24
in_channels = 32
out_channels = 16
height = 31
width = 33


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)

    def forward(self, x):
        return self.deconv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return []
