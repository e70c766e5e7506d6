"""y = A @ x (KernelBench level 1, 4_Matrix_vector_multiplication_) at a CPU size, inputs from
torch.rand as there. Outputs sum 16384 products: on the stress variants' mixed signs they cancel to
~1% of what was summed, where every summation order rounds differently."""

import torch
from torch import nn

M = 256
K = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, 1)]


def get_init_inputs():
    return []
