"""ReLU whose first 12 calls in a process take 40 ms more: the shape of a fresh process paying its
heap's growth and page faults (tests/data/problems/relu_kernelbench_64mib.py under load: 16 calls
of ~145 ms, then 5 ms), made deterministic. The reference time printed at a run's start must be the
steady one, as the verifier's is (tests/test_probe_timing.py)."""

import time

import torch
from torch import nn

rows = 1000
cols = 4095
SLOW_CALLS = 12
_calls = [0]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _calls[0] += 1
        if _calls[0] <= SLOW_CALLS:
            time.sleep(0.04)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
