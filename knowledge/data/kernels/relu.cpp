#include <cstdint>
#include <immintrin.h>

// ReLU over a contiguous tensor, one pass. The output is written with non-temporal (streaming)
// stores: the 32 MB result is not read back, so skipping the read-for-ownership of every output
// line cuts DRAM traffic from three passes to two (measured 1.7 ms vs 3.2 ms for the plain loop,
// 1 thread, 1000 x 8191). Streaming stores need 32-byte aligned addresses: a scalar head runs
// until the output is aligned, a scalar tail finishes. The select x > 0 ? x : 0 is written out:
// std::max under "#pragma omp simd" made g++ emit a branchy scalar loop (38 ms).
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    const int64_t n = x_dim0 * x_dim1;
    int64_t i = 0;
#ifdef __AVX2__
    for (; i < n && (reinterpret_cast<uintptr_t>(out0 + i) & 31) != 0; ++i) out0[i] = x[i] > 0.0f ? x[i] : 0.0f;
    const __m256 zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(out0 + i, _mm256_max_ps(_mm256_loadu_ps(x + i), zero));
    _mm_sfence();  // streaming stores are weakly ordered: make them visible before returning
#endif
    for (; i < n; ++i) out0[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
