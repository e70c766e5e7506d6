"""category: others — per-sample cross-entropy of logits against class labels."""

import torch
import torch.nn.functional as F
from torch import nn

# reduction='none': a per-sample vector, because a single scalar output cannot tell a real kernel
# from one that returns a constant.
batch = 4096
classes = 1001


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, labels):
        return F.cross_entropy(logits, labels, reduction="none")


def get_inputs():
    return [torch.randn(batch, classes), torch.randint(0, classes, (batch,))]


def get_init_inputs():
    return []
