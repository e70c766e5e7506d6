#include <cstdint>
#include <cmath>
// three loops: one vectorized with an alias check, one float reduction, one with a call
extern "C" void axpy(const float* x, float* y, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
extern "C" float dot(const float* x, const float* y, int64_t n) {
    float s = 0.f;
    for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
    return s;
}
extern "C" void noisy(float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::nextafter(y[i], 0.f);
}
