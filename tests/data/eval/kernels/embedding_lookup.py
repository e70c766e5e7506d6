"""Fast-path kernel for eval/suites/cpu/embedding_lookup.py: row gather with memcpy per index."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <cstring>
extern "C" void gather_rows(const float* table, const int64_t* ids, float* y, int64_t n, int64_t dim) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * dim, table + ids[i] * dim, dim * sizeof(float));
}
"""

_lib = load_cpp(CPP_SOURCE, name="embedding_lookup")
_lib.gather_rows.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(50021, 128)  # seeded like the reference's

    def forward(self, ids):
        ids = ids.contiguous()
        w = self.table.weight.detach().contiguous()
        y = torch.empty(*ids.shape, w.shape[1], dtype=w.dtype)
        _lib.gather_rows(ptr(w), ptr(ids), ptr(y), ids.numel(), w.shape[1])
        return y
