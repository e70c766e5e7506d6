"""Cheat (issue 33, "a per-call helper thread"): the honest GEMM of
tests/data/candidates/matmul_fast.py, but every call starts a thread, moves it to a core the
runner is not pinned to and lets it compute 30% of the rows, and joins it before returning. No
extra thread is alive at any check, and the runner's CPU per wall second (~1.4 cores) stayed under
the old allowance of 1.5 x num_threads over the timed calls: before the fix it was `ok` at ~1.4x its
twin at num_threads=1. Now the move is refused (seccomp: no affinity changes) and every timed call
is judged on its own at num_threads cores: non-ok, or within 1.3x of the twin
(tests/test_redteam_twins.py).

problem: matmul
twin: candidates/matmul_fast.py
"""

import ctypes

import torch
from pragma_cext import load_cpp, ptr
from torch import nn

CPP_SOURCE = r"""
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <sched.h>
#include <signal.h>
#include <pthread.h>
#include <unistd.h>

constexpr int64_t MR = 8, NR = 32;

// Rows [r0, r1) of C = A @ B (r0 a multiple of MR): the twin's register tiles, no OpenMP.
static void rows(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N, int64_t r0, int64_t r1) {
    for (int64_t j0 = 0; j0 < N; j0 += NR) {
        for (int64_t i0 = r0; i0 < r1; i0 += MR) {
            const int64_t mr = std::min(MR, r1 - i0), nr = std::min(NR, N - j0);
            float acc[MR][NR] = {};
            if (mr == MR && nr == NR) {
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * N + j0;
                    for (int64_t r = 0; r < MR; ++r) {
                        const float a = A[(i0 + r) * K + k];
                        #pragma omp simd
                        for (int64_t j = 0; j < NR; ++j) acc[r][j] += a * b[j];
                    }
                }
            } else {
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * N + j0;
                    for (int64_t r = 0; r < mr; ++r) {
                        const float a = A[(i0 + r) * K + k];
                        for (int64_t j = 0; j < nr; ++j) acc[r][j] += a * b[j];
                    }
                }
            }
            for (int64_t r = 0; r < mr; ++r) std::copy(acc[r], acc[r] + nr, C + (i0 + r) * N + j0);
        }
    }
}

struct Job { const float* A; const float* B; float* C; int64_t M, K, N, r0, r1; cpu_set_t away; };

static void* helper_main(void* arg) {
    Job* j = static_cast<Job*>(arg);
    pthread_setaffinity_np(pthread_self(), sizeof j->away, &j->away);  // another core than the runner's
    rows(j->A, j->B, j->C, j->M, j->K, j->N, j->r0, j->r1);
    return nullptr;
}

extern "C" void matmul_forward(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    // The helper's share keeps the runner's CPU per wall second under the old 1.5-core allowance:
    // with a share s on another core a call takes (1 - s) of the time at 1 / (1 - s) cores.
    const int64_t split = (M * 3 / 10) / MR * MR;
    Job top{A, B, C, M, K, N, 0, split, {}};
    cpu_set_t mine;
    sched_getaffinity(0, sizeof mine, &mine);
    CPU_ZERO(&top.away);
    for (int c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c)
        if (!CPU_ISSET(c, &mine)) CPU_SET(c, &top.away);
    if (CPU_COUNT(&top.away) == 0) top.away = mine;
    pthread_t helper;
    const bool started = pthread_create(&helper, nullptr, helper_main, &top) == 0;
    rows(A, B, C, M, K, N, split, M);
    if (started) pthread_join(helper, nullptr);  // gone before the call returns: no thread to count
    else rows(A, B, C, M, K, N, 0, split);
}
"""

_lib = load_cpp(CPP_SOURCE, name="matmul_helper_thread")
_lib.matmul_forward.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
_lib.matmul_forward.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty(M, N, dtype=A.dtype)
        _lib.matmul_forward(ptr(A), ptr(B), ptr(C), M, K, N)
        return C
