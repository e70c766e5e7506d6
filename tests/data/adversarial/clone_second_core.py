"""Cheat (issue 33, "a second core without a thread"): the honest GEMM of
tests/data/candidates/matmul_fast.py, but every call clones a child process that shares the
runner's memory (clone with CLONE_VM and without CLONE_THREAD), moves it to a core the runner is
not pinned to and lets it compute the lower half of the rows while the runner computes the upper
half; the child is reaped before the call returns. Its CPU then lands in the runner's cutime/cstime
(fields of /proc/PID/stat the thread budget did not read), no thread is ever seen in
/proc/PID/task, and no child is alive at any check: before the fix it was `ok` at ~1.8x its twin
at num_threads=1. Now the move is refused (seccomp: no affinity changes), so the child shares the
runner's core, and a reaped child's CPU counts as the candidate's: non-ok, or within 1.3x of the
twin (tests/test_redteam_twins.py).

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
#include <sys/wait.h>
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

static int child_main(void* arg) {
    Job* j = static_cast<Job*>(arg);
    sched_setaffinity(0, sizeof j->away, &j->away);  // another core than the runner's
    rows(j->A, j->B, j->C, j->M, j->K, j->N, j->r0, j->r1);
    return 0;  // glibc's clone wrapper ends this task alone (exit, not exit_group)
}

extern "C" void matmul_forward(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    constexpr size_t STACK = 1 << 20;
    static char* stack = static_cast<char*>(std::malloc(STACK));
    const int64_t split = (M / 2) / MR * MR;
    Job low{A, B, C, M, K, N, split, M, {}};
    cpu_set_t mine;
    sched_getaffinity(0, sizeof mine, &mine);
    CPU_ZERO(&low.away);
    for (int c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c)
        if (!CPU_ISSET(c, &mine)) CPU_SET(c, &low.away);
    if (CPU_COUNT(&low.away) == 0) low.away = mine;
    const pid_t child = clone(child_main, stack + STACK, CLONE_VM | SIGCHLD, &low);
    rows(A, B, C, M, K, N, 0, split);
    if (child > 0) waitpid(child, nullptr, 0);  // reaped: its CPU goes to this process's cutime
    else rows(A, B, C, M, K, N, split, M);
}
"""

_lib = load_cpp(CPP_SOURCE, name="matmul_clone")
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
