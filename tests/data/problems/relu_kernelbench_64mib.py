"""KernelBench level 1 19_ReLU's layout at 1024 x 16384: a 64 MiB input and output.

Above glibc's 32 MiB mmap ceiling: a fresh process's first calls pay the heap's growth (30-50 ms
each here against ~6 ms steady), which is what made the reference time printed at a run's start
(185 ms) disagree with the verifier's (5.6 ms) before the probe timed it as the verifier does.
"""

import torch
from torch import nn

batch_size = 1024
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
