"""Cheat (issue 33): a ReLU that writes the first third of its output and leaves the other pages
protected (mprotect PROT_NONE); a SIGSEGV handler computes a page when something first reads it.
Every checked or audited call is read (by the runner's copy-out), so every output the judge saw
was right while most timed calls did a third of the work: ok at 2.03x where its twin read 1.03x.
The judge now reads the output itself, from the runner's memory, before its clock stops: a
protected page is unreadable there and no handler runs.

problem: relu
twin: candidates/relu_fast.py
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <csignal>
#include <sys/mman.h>

static const float* g_in = nullptr;
static float* g_out = nullptr;
static int64_t g_n = 0;
static char* g_lo = nullptr;  // the protected range of the last output
static char* g_hi = nullptr;
static bool g_installed = false;
static struct sigaction g_prev;

static void relu_range(int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) g_out[i] = g_in[i] > 0.f ? g_in[i] : 0.f;
}

// A read of a protected page: open it and compute its elements, then let the read resume.
static void on_fault(int sig, siginfo_t* si, void* ctx) {
    char* a = static_cast<char*>(si->si_addr);
    if (a >= g_lo && a < g_hi) {
        char* page = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(a) & ~uintptr_t(4095));
        mprotect(page, 4096, PROT_READ | PROT_WRITE);
        char* base = reinterpret_cast<char*>(g_out);
        int64_t i0 = (page - base) / 4, i1 = (page + 4096 - base) / 4;
        relu_range(i0 < 0 ? 0 : i0, i1 > g_n ? g_n : i1);
        return;
    }
    sigaction(SIGSEGV, &g_prev, nullptr);  // not ours: the fault happens again under the old handler
}

extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    if (!g_installed) {
        struct sigaction sa = {};
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigaction(SIGSEGV, &sa, &g_prev);
        g_installed = true;
    }
    if (g_hi > g_lo) mprotect(g_lo, g_hi - g_lo, PROT_READ | PROT_WRITE);  // the last output's leftovers
    g_in = x; g_out = y; g_n = n;
    char* lo = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(y + n / 3) + 4095) & ~uintptr_t(4095));
    char* hi = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(y + n) & ~uintptr_t(4095));
    if (hi <= lo) { relu_range(0, n); g_lo = g_hi = nullptr; return; }
    int64_t a = (lo - reinterpret_cast<char*>(y)) / 4, b = (hi - reinterpret_cast<char*>(y)) / 4;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < a; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    relu_range(b, n);
    g_lo = lo; g_hi = hi;
    mprotect(lo, hi - lo, PROT_NONE);
}
"""

_lib = load_cpp(CPP_SOURCE, name="relu_fault_deferred")
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
