"""category: others — embedding table lookup (gather rows by index)."""

import torch
from torch import nn

vocab = 50021
embed_dim = 128
batch = 2048
seq_len = 29


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(vocab, embed_dim)

    def forward(self, ids):
        return self.table(ids)


def get_inputs():
    return [torch.randint(0, vocab, (batch, seq_len))]


def get_init_inputs():
    return []
