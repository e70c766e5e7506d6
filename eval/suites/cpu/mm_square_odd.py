"""category: matmul — square fp32 matrix product with an odd size."""

import torch
from torch import nn

# 767 = 13 x 59: no power-of-two tile divides it, so edge tiles are exercised.
n = 767


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
