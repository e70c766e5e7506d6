"""category: activation — the ReLU example (eval/suites/examples/relu.py) at a test size.

Why a copy: the flow tests (graph runs, resume and kill tests, the CLI, servers) verify and
profile ReLU dozens of times to exercise the loop, not the kernel at scale; at the example's
32 MiB a verification costs ~2.1 s here, at 2 MiB ~0.6 s. The verifier's own tests, the red team
and the profiler tests keep the example's size.
"""

import torch
from torch import nn

# Odd sizes: kernels cannot assume a multiple of the vector width (n = 522,753 elements).
batch_size = 511
dim = 1023


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    # randn: about half the outputs are positive, so an all-zeros output fails allclose.
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
