"""category: reduction — sum over the last dimension (keepdim=False)."""

import torch
from torch import nn

batch_size = 4093
dim = 4093
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [reduce_dim]
