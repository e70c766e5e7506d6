"""Kernel-format fixture: learned weights (nn.Linear) and a module-level constant read by the
constructor; the generated module rebuilds the layer as the reference does and passes its weight
and bias to the kernel."""

import torch
from torch import nn

IN_FEATURES = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(IN_FEATURES, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
