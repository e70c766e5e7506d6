"""C = A @ B for symmetric A and B, built the way KernelBench's 13_Matmul_for_symmetric_matrices
builds them ((X + X.T) / 2 of torch.rand), at a CPU size. The symmetry is stated by the problem:
a kernel may rely on it."""

import torch
from torch import nn

N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    A = torch.rand(N, N)
    B = torch.rand(N, N)
    return [(A + A.T) / 2, (B + B.T) / 2]


def get_init_inputs():
    return []
