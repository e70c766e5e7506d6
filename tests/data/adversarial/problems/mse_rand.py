"""Mean squared error (one scalar) of torch.rand predictions and targets, as KernelBench's
94_MSELoss draws them, at a CPU size. On inputs of one range the loss barely moves (about 1/6
whatever the draw), so only the stress variants let the verifier tell a kernel from a constant."""

import torch
from torch import nn

batch_size = 128
dim = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    return [torch.rand(batch_size, dim), torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
