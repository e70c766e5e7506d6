"""KernelBench-style candidate: the kernel is built with torch.utils.cpp_extension.load_inline."""

from torch import nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: expected float32");
    torch::Tensor src = x.contiguous();
    torch::Tensor out = torch::empty_like(src);
    const float* in_ptr = src.data_ptr<float>();
    float* out_ptr = out.data_ptr<float>();
    const int64_t n = src.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out_ptr[i] = in_ptr[i] > 0.f ? in_ptr[i] : 0.f;
    return out;
}
"""

# One extension name per source: torch would otherwise version a reused name (name_v1, ...).
relu_ext = load_inline(
    name="relu_bench_inline_fixture",
    cpp_sources=CPP_SOURCE,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x)
