"""category: normalization — layer normalization over the last dimension (affine, default init)."""

import torch
from torch import nn

rows = 4001
features = 1023


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return []
