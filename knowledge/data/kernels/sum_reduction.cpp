#include <cstdint>

// Sum over dim 1 of a 2-D tensor (the problem's constructor argument; only dim == 1 is handled,
// which is what the problem uses). 32 independent fp32 partial sums per row: gcc vectorises the
// inner lane loop into four 8-wide accumulators, so the adds overlap instead of waiting on each
// other (a single accumulator is bound by the add latency), and they are combined at the end.
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t dim) {
    (void)dim;
    const int64_t n = x_dim1;
    const int64_t vec_end = n - n % 32;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x_dim0; ++i) {
        const float* row = x + i * n;
        float lanes[32] = {0.0f};
        for (int64_t j = 0; j < vec_end; j += 32)
            for (int l = 0; l < 32; ++l) lanes[l] += row[j + l];
        float s = 0.0f;
        for (int l = 0; l < 32; ++l) s += lanes[l];
        for (int64_t j = vec_end; j < n; ++j) s += row[j];
        out0[i] = s;
    }
}
