"""Rule-based optimisation guidance (optimize_advice=rules): total over the bottleneck vocabulary,
worded from the profile's own evidence, and no model is asked.

The profile dicts below are written by hand with the keys tools/profilers/cpu.py emits (bottleneck,
bottleneck_evidence, roofline); they are not captured from a profiler run."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import scripted
import torch

from pragma.graph.context import resolve_context
from pragma.nodes import playbook
from pragma.tools.profilers.bottleneck import VOCABULARY

PROFILE = {
    "bottleneck": "not-vectorized",
    "bottleneck_evidence": "scalar SSE in the hot loop (vector share 0%)",
    "roofline": {"status": "ok", "roofline_pct": 12.6, "bound_by": "memory", "roof_level": "L3"},
}


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("label", VOCABULARY)
def test_every_bottleneck_label_has_a_plan(label, backend):
    steps = playbook.plan_for(label, backend)
    assert steps and all(isinstance(s, str) and len(s) > 20 for s in steps)


def test_the_plan_follows_the_label_and_quotes_the_evidence():
    g = playbook.guidance_from_profile(PROFILE, {"iteration": 1, "speedup": 1.2}, 1.1, "cpu", no_profile=False)
    assert g["bottleneck"] == "not-vectorized" and g["should_stop"] is False and g["source"] == "rules"
    assert "scalar SSE in the hot loop" in g["text"]
    assert "13% of its bandwidth roof (L3)" in g["text"]
    assert "best so far is attempt 1 at 1.20x" in g["text"]
    assert playbook.CPU_PLANS["not-vectorized"][0] in g["text"]
    other = playbook.guidance_from_profile({**PROFILE, "bottleneck": "compute-bound"}, {}, 1.1, "cpu", False)
    assert playbook.CPU_PLANS["compute-bound"][0] in other["text"]
    assert playbook.CPU_PLANS["not-vectorized"][0] not in other["text"]


def test_no_profile_mode_sees_no_profile_evidence():
    g = playbook.guidance_from_profile(PROFILE, {}, 0.9, "cpu", no_profile=True)
    assert g["bottleneck"] == "unknown"
    assert "SSE" not in g["text"] and "roof" not in g["text"]
    assert playbook.CPU_PLANS["unknown"][0] in g["text"]


@pytest.mark.parametrize("label", VOCABULARY)
def test_one_thread_gets_no_step_that_needs_more(label):
    # Told to parallelize a one-thread batch norm, the embedded model added collapse(2) and failed to
    # compile three times in a row (emb1128b): a step that cannot pay at num_threads=1 is not given.
    one, two = playbook.plan_for(label, "cpu", num_threads=1), playbook.plan_for(label, "cpu", num_threads=2)
    assert one and not any("parallel for" in s or "more cores" in s for s in one)
    assert set(one) <= set(two) and two == playbook.plan_for(label, "cpu")
    g = playbook.guidance_from_profile({}, {}, 2.8, "cpu", no_profile=True, num_threads=1)
    assert "parallelize the outer loop" not in g["text"] and "1. fuse all work" in g["text"]
    assert (
        "parallelize the outer loop" in playbook.guidance_from_profile({}, {}, 2.8, "cpu", True, num_threads=2)["text"]
    )


def test_a_label_outside_the_vocabulary_gets_the_generic_plan():
    g = playbook.guidance_from_profile({"bottleneck": "made-up"}, {}, 1.0, "gpu", no_profile=False)
    assert g["bottleneck"] == "unknown" and playbook.GPU_PLANS["unknown"][0] in g["text"]


def _state():
    return {
        "problem": {"name": "relu", "source": "x", "path": "relu.py"},
        "candidate": {"iteration": 2, "code": "code"},
        "verification": {"speedup": 1.1, "runtime_ms": 1.0, "ref_runtime_ms": 1.1},
        "best": {"iteration": 1, "speedup": 1.2, "code": "best"},
        "profile": PROFILE,
        "attempts": [],
    }


def test_rules_mode_asks_no_model(monkeypatch):
    from pragma.nodes import conductor, llm

    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for({}))  # any call would fail: empty script
    runtime = SimpleNamespace(context=resolve_context(coder_model="scripted:x", optimize_advice="rules"))
    update = conductor.conductor(_state(), runtime)
    assert update["guidance"]["bottleneck"] == "not-vectorized"
    assert update["log"][0]["source"] == "rules" and update["log"][0]["output_tokens"] == 0
    assert "usage" not in update


def test_optimize_advice_auto_is_rules_for_the_local_model_only():
    from pragma.nodes.conductor import advice_mode

    assert advice_mode(resolve_context(coder_model="local")) == "rules"
    assert advice_mode(resolve_context(coder_model="openai:big")) == "model"
    assert advice_mode(resolve_context(coder_model="local", optimize_advice="model")) == "model"


SIGMOID = """#include <cmath>
#include <cstdint>
static inline float sigmoid_fn(float v) { using namespace std; return (float)(1 / (1 + exp(-v))); }
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    const int64_t n = x_dim0 * x_dim1;
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) out0[i] = sigmoid_fn(x[i]);
}
"""


def test_a_kernel_calling_libm_gets_the_simd_declaration_step_first():
    guidance = playbook.guidance_from_profile({"bottleneck": "memory-bound"}, {}, 0.18, "cpu", False, SIGMOID)
    steps = guidance["text"].split("Next steps:\n")[1]
    assert steps.startswith("1. the loop calls expf one element at a time")
    assert "#pragma omp declare simd notinbranch\nfloat expf(float);" in steps
    # Already declared, no libm call, or the GPU: the plan is the label's alone.
    declared = SIMD_DECL + SIGMOID
    for code, backend in ((declared, "cpu"), ("out0[i] = x[i] > 0 ? x[i] : 0;", "cpu"), (SIGMOID, "gpu")):
        text = playbook.guidance_from_profile({"bottleneck": "memory-bound"}, {}, 1.0, backend, False, code)["text"]
        assert "the loop calls" not in text


SIMD_DECL = 'extern "C" {\n#pragma omp declare simd notinbranch\nfloat expf(float);\n}\n'


def _build(tmp_path, monkeypatch, source: str) -> str:
    """``source`` compiled by the verifier's own builder (tools/inside/cext.py: its flags); the .so's path."""
    from pragma.tools.inside import cext

    monkeypatch.setenv("PRAGMA_BUILD_DIR", str(tmp_path))
    return cext.build_cpp(source)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_the_simd_declaration_makes_gpp_call_glibcs_vector_exp_and_stays_correct(tmp_path, monkeypatch):
    # What the step promises, with the verifier's compiler flags: the vector expf is called and the
    # result is within the verifier's tolerance of torch.
    step = playbook.libm_step(SIGMOID)
    lib_path = _build(tmp_path, monkeypatch, step.split("```cpp\n")[1].split("```")[0])  # the file the step shows
    symbols = subprocess.run(["nm", "-D", str(lib_path)], capture_output=True, text=True, check=True).stdout
    assert "_ZGV" in symbols and "v_expf" in symbols, symbols
    fn = ctypes.CDLL(str(lib_path)).pragma_kernel
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64] * 2
    x = torch.randn(37, 129, generator=torch.Generator().manual_seed(3)) * 6
    out = torch.empty_like(x)
    fn(x.data_ptr(), 37, 129, out.data_ptr(), 37, 129)
    torch.testing.assert_close(out, torch.sigmoid(x), atol=1e-4, rtol=1e-4)


RELU = """#include <cmath>
#include <cstdint>
static inline float relu_fn(float v) { using namespace std; return (float)(v > 0 ? v : 0); }
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    const int64_t n = x_dim0 * x_dim1;
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) out0[i] = relu_fn(x[i]);
}
"""

# The same loop as the embedded model also writes it: braces, a post-increment, another index name.
LEAKY = """#include <cstdint>
extern "C" void pragma_kernel(const float* __restrict__ x, int64_t x_dim0, int64_t x_dim1,
                              float* __restrict__ out0, int64_t out0_dim0, int64_t out0_dim1) {
    const int64_t total = x_dim0 * x_dim1;
    for (int64_t k = 0; k < total; k++) {
        out0[k] = x[k] > 0.0f ? x[k] : 0.01f * x[k];
    }
}
"""


@pytest.fixture
def avx(monkeypatch):
    monkeypatch.setattr(playbook, "_has_avx", lambda: True)


def test_a_memory_bound_map_kernel_gets_its_whole_file_with_streaming_stores_first(avx):
    for label in ("dram-bound", "memory-bound"):
        steps = playbook.guidance_from_profile({"bottleneck": label}, {}, 0.95, "cpu", False, RELU)["text"]
        first = steps.split("Next steps:\n")[1].split("\n2. ")[0]
        assert first.startswith("1. the output is written with ordinary stores")
        assert "#include <immintrin.h>" in first and "_mm256_stream_ps(out0 + ps_start + ps_j" in first
        assert "ps_buf[ps_j] = relu_fn(x[i]);" in first  # the kernel's own expression, not a generic one


def test_the_streaming_step_is_left_out_where_it_does_not_apply(avx, monkeypatch):
    def first_step(code, label="dram-bound", backend="cpu", no_profile=False):
        text = playbook.guidance_from_profile({"bottleneck": label}, {}, 0.9, backend, no_profile, code)["text"]
        return text.split("Next steps:\n")[1].split("\n")[0]

    assert "streaming" not in first_step(RELU, label="compute-bound")
    assert "streaming" not in first_step(RELU, backend="gpu")
    assert "streaming" not in first_step(RELU, no_profile=True)  # N-PRAGMA reads no profile
    assert "the loop calls expf" in first_step(SIGMOID)  # the libm step first; streaming on the next attempt
    assert playbook.streaming_code(RELU.replace("float* out0", "double* out0")) == ""
    assert playbook.streaming_code(playbook.streaming_code(RELU)) == ""  # already streams
    assert playbook.streaming_code("out0[i] = x[i];") == ""  # no loop over a flat index
    inside_region = RELU.replace("#pragma omp parallel for simd", "#pragma omp for")
    assert playbook.streaming_code(inside_region) == ""  # its parallel region would nest the rewrite
    monkeypatch.setattr(playbook, "_has_avx", lambda: False)
    assert playbook.streaming_code(RELU) == ""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize(("code", "reference"), [(RELU, torch.relu), (LEAKY, torch.nn.functional.leaky_relu)])
def test_the_streaming_rewrite_compiles_streams_and_stays_exact(tmp_path, monkeypatch, code, reference):
    # What the step shows the Coder, built with the verifier's flags: non-temporal stores in the
    # binary, and every element exact, on odd sizes and on an output whose start is not 32-byte
    # aligned (the scalar head), both with the real machine's AVX check.
    rewritten = playbook.streaming_code(code)
    if not rewritten:
        pytest.skip("this machine has no AVX: the step is not offered")
    lib_path = _build(tmp_path, monkeypatch, rewritten)
    disassembly = subprocess.run(["objdump", "-d", str(lib_path)], capture_output=True, text=True).stdout
    assert "vmovntps" in disassembly or not shutil.which("objdump")
    fn = ctypes.CDLL(str(lib_path)).pragma_kernel
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64] * 2
    for rows, cols, offset in ((37, 129, 0), (1000, 8191, 0), (3, 5, 0), (64, 333, 3)):
        x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows))
        backing = torch.full((rows * cols + offset,), float("nan"))
        out = backing[offset:].view(rows, cols)
        fn(x.data_ptr(), rows, cols, out.data_ptr(), rows, cols)
        assert torch.equal(out, reference(x)), (rows, cols, offset)
