"""MinGPT's tanh GELU on inputs from torch.rand, as KernelBench's 88_MinGPTNewGelu draws them
(every input in [0, 1)), at a CPU size."""

import math

import torch
from torch import nn

batch_size = 512
dim = 4099


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
