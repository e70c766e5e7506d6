"""Kernel-format fixture: three outputs of two dtypes (row max fp32 [50], its index int64 [50] and
the clamped input fp32 [50, 77], shaped like the input) returned as a tuple."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.amax(dim=1), x.argmax(dim=1), torch.clamp(x, min=0.0)


def get_inputs():
    return [torch.randn(50, 77)]


def get_init_inputs():
    return []
