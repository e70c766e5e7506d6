"""ReLU on inputs from torch.rand, as KernelBench's 19_ReLU draws them: every input is in [0, 1),
so ReLU is the identity on every input the problem samples."""

import torch
from torch import nn

batch_size = 256
dim = 16381


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
