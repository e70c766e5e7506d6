"""category: activation — elementwise ReLU over a large 2-D tensor."""

import torch
from torch import nn

# Odd inner size so kernels cannot assume a multiple of the vector width. The 31 MiB output
# stays under glibc's 32 MiB mmap ceiling: bigger fresh outputs pay ~25 ms of page faults per call.
batch_size = 1000
dim = 8191


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    # randn: about half the outputs are positive, so an all-zeros output fails allclose.
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
