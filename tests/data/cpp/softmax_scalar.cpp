#include <cstdint>
#include <cmath>
// Row softmax as plain scalar code with a libm call per element: gcc cannot vectorize std::exp
// without -ffast-math or vector libm declarations, so the built loop runs scalar FP.
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols; float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int64_t j = 0; j < cols; ++j) { yr[j] = std::exp(xr[j] - m); s += yr[j]; }
        for (int64_t j = 0; j < cols; ++j) yr[j] /= s;
    }
}
