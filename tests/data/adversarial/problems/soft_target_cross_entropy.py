"""Cross-entropy with soft targets: predictions from torch.randn, targets softmax rows (the problem
states they are probability rows: non-negative, each summing to 1). A kernel may rely on that."""

import torch
from torch import nn

batch_size = 256
num_classes = 1000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return -(targets * torch.log_softmax(predictions, dim=-1)).sum(dim=-1).mean()


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.softmax(torch.randn(batch_size, num_classes), dim=-1)]


def get_init_inputs():
    return []
