"""category: matmul — dense single-precision matrix product C = A @ B."""

import torch
from torch import nn

# K is moderate so fp32 accumulation-order differences stay inside atol=rtol=1e-4.
M = 1021
K = 512
N = 1021


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
