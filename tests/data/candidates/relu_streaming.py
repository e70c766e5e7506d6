"""Honest candidate for eval/suites/examples/relu.py: ReLU with streaming (non-temporal) stores, the
form nodes/playbook.py's streaming_step gives the Coder. The output skips the read-for-ownership,
so the kernel moves 8 bytes per element where an ordinary-store loop moves 12: the profile's
bandwidth roof must still bound it (tests/test_roofs.py)."""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <immintrin.h>
#include <algorithm>
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    // _mm256_stream_ps needs 32-byte aligned addresses: a scalar head runs until y + head is aligned.
    int64_t head = 0;
    while (head < n && (reinterpret_cast<uintptr_t>(y + head) & 31) != 0) {
        y[head] = x[head] > 0.f ? x[head] : 0.f;
        ++head;
    }
    const int64_t end = head + (n - head) / 8 * 8;
    #pragma omp parallel for
    for (int64_t start = head; start < end; start += 1024) {
        alignas(32) float buf[1024];
        const int64_t m = std::min<int64_t>(1024, end - start);
        #pragma omp simd
        for (int64_t j = 0; j < m; ++j) buf[j] = x[start + j] > 0.f ? x[start + j] : 0.f;
        for (int64_t j = 0; j < m; j += 8) _mm256_stream_ps(y + start + j, _mm256_load_ps(buf + j));
    }
    _mm_sfence();  // streaming stores are weakly ordered: make them visible before returning
    for (int64_t i = end; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_streaming")
_lib.relu_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(ptr(x), ptr(y), x.numel())
        return y
