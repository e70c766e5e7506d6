#include <cstdint>

// ReLU over a contiguous tensor: one pass, vectorised by omp simd; the select keeps -0.0 and NaN
// handling the same as torch.relu (x > 0 ? x : 0).
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    const int64_t n = x_dim0 * x_dim1;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out0[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
