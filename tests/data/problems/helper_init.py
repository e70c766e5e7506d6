"""Kernel-format fixture: the constructor builds its layer through a helper function, which the
generated module cannot reproduce, so candidate_format=kernel falls back to module."""

import torch
from torch import nn


def _make_layer(n_in, n_out):
    return nn.Linear(n_in, n_out)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = _make_layer(16, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
