"""GPU-sized add+ReLU (16M + 3 fp32 elements, 192 MiB of traffic for PyTorch's two kernels, 128 MiB
for a fused one): the speedup check for test_gpu_device.py. Too big for the CPU interpreter."""

import torch
from torch import nn

n = 2**24 + 3


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
