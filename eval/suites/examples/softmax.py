"""category: normalization — row-wise softmax over the last dimension."""

import torch
from torch import nn

# dim is kept moderate so typical outputs (~1/dim) stay well above the 1e-4 tolerance; the
# 31 MiB output stays under glibc's 32 MiB mmap ceiling (bigger fresh outputs pay page faults).
batch_size = 4000
dim = 2047


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
