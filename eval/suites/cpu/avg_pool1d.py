"""category: pooling/reduction — 1-D average pooling, window 4, stride 3."""

import torch
import torch.nn.functional as F
from torch import nn

batch = 16
channels = 128
length = 1023


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.avg_pool1d(x, kernel_size=4, stride=3)


def get_inputs():
    return [torch.randn(batch, channels, length)]


def get_init_inputs():
    return []
