#include <cstdint>
#include <cstring>

// C = A @ B, row-major fp32. i-k-j order so the inner loop streams a row of B and a row of C
// (unit stride, vectorised FMA); blocking over k keeps a panel of B in L2 while rows of A pass.
extern "C" void pragma_kernel(const float* A, int64_t A_dim0, int64_t A_dim1,
                              const float* B, int64_t B_dim0, int64_t B_dim1,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    const int64_t M = A_dim0, K = A_dim1, N = B_dim1;
    const int64_t KB = 128;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) std::memset(out0 + i * N, 0, sizeof(float) * N);
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
        const int64_t k1 = k0 + KB < K ? k0 + KB : K;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            float* c = out0 + i * N;
            for (int64_t k = k0; k < k1; ++k) {
                const float a = A[i * K + k];
                const float* b = B + k * N;
                #pragma omp simd
                for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
            }
        }
    }
}
