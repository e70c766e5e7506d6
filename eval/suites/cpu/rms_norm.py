"""category: normalization — RMS normalization x / sqrt(mean(x^2) + eps) * weight."""

import torch
from torch import nn

rows = 2047
features = 2049
eps = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        # A non-trivial weight (a kernel that ignores it fails), initialised like nn layers are.
        self.weight = nn.Parameter(torch.empty(features))
        nn.init.normal_(self.weight, mean=1.0, std=0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * self.weight


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return []
