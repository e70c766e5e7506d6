"""category: matmul — fully connected layer y = x W^T + b (nn.Linear weights from the seed)."""

import torch
from torch import nn

batch = 1025
in_features = 1023
out_features = 511


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return []
