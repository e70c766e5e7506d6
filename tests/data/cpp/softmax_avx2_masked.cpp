#include <cstdint>
#include <cmath>
#include <immintrin.h>
// Row softmax in AVX2 intrinsics; the row's tail goes through masked loads and stores, so no
// scalar remainder loop is left for gcc to auto-vectorize.
static inline __m256 exp256(__m256 x) {
    const __m256 l2e = _mm256_set1_ps(1.44269504f), c1 = _mm256_set1_ps(0.6931472f), c2 = _mm256_set1_ps(0.2402265f);
    __m256 t = _mm256_mul_ps(x, l2e);
    __m256 fi = _mm256_floor_ps(t);
    __m256 f = _mm256_sub_ps(t, fi);
    __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(c2, f, c1), f, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fi), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
static inline __m256i tail_mask(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_hadd_ps(s, s); s = _mm_hadd_ps(s, s); return _mm_cvtss_f32(s);
}
static inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s)); s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1)); return _mm_cvtss_f32(s);
}
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols; float* yr = y + r * cols;
        const __m256i mask = tail_mask(cols % 8);
        const int64_t body = cols - cols % 8;
        __m256 vm = _mm256_set1_ps(-INFINITY);
        for (int64_t j = 0; j < body; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(xr + j));
        vm = _mm256_max_ps(vm, _mm256_blendv_ps(vm, _mm256_maskload_ps(xr + body, mask), _mm256_castsi256_ps(mask)));
        const __m256 mm = _mm256_set1_ps(hmax(vm));
        __m256 vs = _mm256_setzero_ps();
        for (int64_t j = 0; j < body; j += 8) {
            __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mm));
            _mm256_storeu_ps(yr + j, e); vs = _mm256_add_ps(vs, e);
        }
        __m256 et = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(xr + body, mask), mm)), _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(yr + body, mask, et); vs = _mm256_add_ps(vs, et);
        const __m256 inv = _mm256_set1_ps(1.0f / hsum(vs));
        for (int64_t j = 0; j < body; j += 8) _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_loadu_ps(yr + j), inv));
        _mm256_maskstore_ps(yr + body, mask, _mm256_mul_ps(_mm256_maskload_ps(yr + body, mask), inv));
    }
}
