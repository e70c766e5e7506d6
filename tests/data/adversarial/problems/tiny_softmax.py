"""Softmax over a very wide row of uniform [0, 1) values: every output lies between ~0.9e-5 and
~2.4e-5, below atol=1e-4.

With these sizes and the default tolerance an all-zeros output would pass, so the verifier must
refuse to judge (rule tolerance_discriminates) instead of accepting any kernel.
"""

import torch
from torch import nn

batch_size = 16
dim = 65536


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
