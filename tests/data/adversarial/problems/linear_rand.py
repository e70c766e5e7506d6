"""y = x W^T + b (nn.Linear) at a CPU size, inputs from torch.rand: a problem with weights, for
kernels that pack their weights once."""

import torch
from torch import nn

batch_size = 64
in_features = 1024
out_features = 512


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
