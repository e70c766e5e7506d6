"""category: pooling/reduction — 3x3 max pooling, stride 2, padding 1."""

import torch
import torch.nn.functional as F
from torch import nn

batch = 8
channels = 32
height = 63
width = 65


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.max_pool2d(x, kernel_size=3, stride=2, padding=1)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return []
