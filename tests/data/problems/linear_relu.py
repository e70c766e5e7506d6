"""Kernel-format fixture: learned weights (nn.Linear), which a lone C++ kernel cannot recreate, so
candidate_format=kernel falls back to module."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
