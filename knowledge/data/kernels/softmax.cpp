#include <cstdint>
#include <cstring>

// Row-wise softmax in three passes per row (max, exp and sum, scale); the row stays in cache.
// expf from libm does not vectorise without -ffast-math (which the verifier forbids), so exp is the
// Cephes polynomial (about 2 ulp after subtracting the row max), written branch-free so gcc
// vectorises it. Reductions use 16 independent lanes: a single accumulator would serialise on
// the add latency, and gcc does not vectorise a plain float reduction without -ffast-math.
static inline float exp_poly(float x) {
    x = x > -87.0f ? x : -87.0f;
    const float t = x * 1.44269504088896341f;
    const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23 trick)
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return e * scale;
}

extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    const int64_t n = x_dim1;
    const int64_t vec_end = n - n % 16;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x_dim0; ++i) {
        const float* row = x + i * n;
        float* out = out0 + i * n;
        float lanes[16];
        for (int l = 0; l < 16; ++l) lanes[l] = row[0];
        for (int64_t j = 0; j < vec_end; j += 16)
            for (int l = 0; l < 16; ++l) lanes[l] = row[j + l] > lanes[l] ? row[j + l] : lanes[l];
        float m = lanes[0];
        for (int l = 1; l < 16; ++l) m = lanes[l] > m ? lanes[l] : m;
        for (int64_t j = vec_end; j < n; ++j) m = row[j] > m ? row[j] : m;
        for (int l = 0; l < 16; ++l) lanes[l] = 0.0f;
        for (int64_t j = 0; j < vec_end; j += 16)
            for (int l = 0; l < 16; ++l) {
                const float e = exp_poly(row[j + l] - m);
                out[j + l] = e;
                lanes[l] += e;
            }
        float s = 0.0f;
        for (int l = 0; l < 16; ++l) s += lanes[l];
        for (int64_t j = vec_end; j < n; ++j) {
            const float e = exp_poly(row[j] - m);
            out[j] = e;
            s += e;
        }
        const float inv = 1.0f / s;
        for (int64_t j = 0; j < n; ++j) out[j] *= inv;
    }
}
