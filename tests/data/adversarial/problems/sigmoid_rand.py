"""Sigmoid on inputs from torch.rand (KernelBench's 21_Sigmoid draws them so): every input is in
[0, 1), at a CPU size."""

import torch
from torch import nn

batch_size = 512
dim = 4099


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(x)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
