"""C = tril(A @ B) for lower triangular A and B, built as KernelBench's
15_Matmul_for_lower_triangular_matrices builds them (tril of torch.rand), at a CPU size. The
triangles are stated by the problem: a kernel may skip the zeros."""

import torch
from torch import nn

M = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


def get_inputs():
    return [torch.tril(torch.rand(M, M)), torch.tril(torch.rand(M, M))]


def get_init_inputs():
    return []
