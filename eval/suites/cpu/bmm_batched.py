"""category: matmul — batched matrix product of small odd-sized matrices."""

import torch
from torch import nn

batch = 128
m = 127
k = 96
n = 131


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
