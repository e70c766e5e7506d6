"""category: matmul — product with a transposed right operand, A @ B^T."""

import torch
from torch import nn

m = 1001
k = 384
n = 999


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b.t()


def get_inputs():
    return [torch.randn(m, k), torch.randn(n, k)]


def get_init_inputs():
    return []
