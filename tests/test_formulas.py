"""knowledge/formulas.py: the operator definitions a kernel-format Coder is shown.

The element-wise expressions are compiled with the real g++ and compared with torch (a wrong
formula in the prompt would teach the model a wrong kernel); the lookup is checked on the CPU
suite's activation and normalization problems and on the spellings KernelBench problems use."""

import ctypes
import re
import shutil
import subprocess

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT

from pragma.knowledge import formulas
from pragma.nodes import coder, prompts

SUITE = ROOT / "eval" / "suites" / "cpu"
EXPECTED = {
    "batch_norm_train": "batch_norm",
    "elu": "elu",
    "gelu_erf": "gelu",
    "group_norm": "group_norm",
    "l2_normalize": "normalize",
    "layer_norm": "layer_norm",
    "leaky_relu": "leaky_relu",
    "log_softmax": "log_softmax",
    "rms_norm": "rms_norm",
    "sigmoid": "sigmoid",
    "silu": "silu",
    "softplus": "softplus",
}


@pytest.mark.parametrize("problem, name", sorted(EXPECTED.items()))
def test_each_activation_and_normalization_problem_gets_its_operator(problem, name):
    assert name in [n for n, _ in formulas.lookup((SUITE / f"{problem}.py").read_text())]


def test_an_operator_written_out_stands_in_for_its_parts():
    # An RMS norm spelled with rsqrt and a mean of squares is rms_norm, not rsqrt and a row mean;
    # a square root of a plain mean of squares (an RMSE, no kept dim) is not a norm.
    for spelled in (
        "return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * self.weight",
        "return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-6)",
        "return torch.tanh(x) * torch.rsqrt(x.square().mean(dim=1, keepdim=True) + 1e-5)",
    ):
        names = [n for n, _ in formulas.lookup(spelled)]
        assert "rms_norm" in names and not {"rsqrt", "mean"} & set(names), spelled
    assert [n for n, _ in formulas.lookup("return x.tanh() * torch.rsqrt(x.pow(2).mean(1, keepdim=True))")] == [
        "tanh",
        "rms_norm",
    ]
    assert [n for n, _ in formulas.lookup("return torch.sqrt(((a - b) ** 2).mean())")] == ["mean"]


def test_a_row_loop_is_written_in_the_signatures_names():
    names = formulas.LoopNames(x="inp", ndim=3, out="out0", weight="norm_weight", bias="")
    loop = formulas.row_loop("layer_norm", names)
    assert "const int64_t n = inp_dim2;" in loop and "const int64_t rows = inp_dim0 * inp_dim1;" in loop
    assert "const float* weight = norm_weight;" in loop
    assert "bias[" not in loop  # no bias argument: the operator runs without it
    assert "for (int64_t r = 0; r < rows; ++r) {" in loop and loop.endswith("}")
    assert "then write out[j]" in formulas.row_loop("mean")  # a row value, not an output
    # The problem's epsilon, wherever it states it, replaces PyTorch's default.
    assert formulas.eps_of((SUITE / "rms_norm.py").read_text()) == "1e-6"
    assert formulas.eps_of("self.n = nn.LayerNorm(8, eps=1e-3)") == "1e-3"
    assert formulas.eps_of("return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-5)") == "1e-5"
    assert formulas.eps_of((SUITE / "layer_norm.py").read_text()) == ""
    assert "const float eps = 0.001f;  // forward()'s eps" in formulas.row_loop("layer_norm", eps="1e-3")


def test_spellings_of_one_operator_and_operators_it_does_not_know():
    src = "self.a = nn.LayerNorm(8)\nself.b = nn.BatchNorm2d(3)\nself.c = nn.ELU()\ny = x.relu()\n"
    src += "z = torch.nn.functional.gelu(y)\nw = nn.GELU()(z)\n"
    assert [n for n, _ in formulas.lookup(src)] == ["layer_norm", "batch_norm", "elu", "relu", "gelu"]
    assert formulas.lookup("return torch.matmul(a, b) + x.sum(dim=1)") == []
    assert formulas.render("return a @ b") == ""


def test_the_kernel_prompt_carries_the_definition_and_a_module_prompt_does_not_need_it():
    section = coder._formulas_section({"source": (SUITE / "elu.py").read_text()})
    assert section.startswith("\n<formulas ")
    # The fast form (knowledge/fast_forms.py, tests/test_fast_forms.py), not the scalar expression.
    assert "static inline float elu_fn(float v, float alpha = 1.0f) {" in section and "pragma_expm1(v)" in section
    assert "elu(x) is elu_fn(x[i])" in section
    # A row-wise operator gets its statements for one row, an element-wise one beside it its
    # function, and a reduction without C++ here its words.
    mixed = formulas.render("y = F.layer_norm(x, (8,))\nz = nn.GroupNorm(2, 4)(y)\nreturn torch.tanh(z)")
    assert (
        mixed.index("tanh_fn(float v)")
        < mixed.index("// layer_norm: one row of x")
        < mixed.index("// group_norm over the channels")
    )
    assert coder._formulas_section({"source": "return a @ b"}) == ""
    assert "formulas" in prompts.FORMULAS_SECTION


def _build(tmp_path, monkeypatch, stem: str, source: str) -> ctypes.CDLL:
    """``source`` compiled by the verifier's own builder (tools/inside/cext.py: its flags), loaded."""
    from pragma.tools.inside import cext

    monkeypatch.setenv("PRAGMA_BUILD_DIR", str(tmp_path))
    return cext.load_cpp(source, name=stem)


TORCH = {
    "relu": torch.relu,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "elu": F.elu,
    "selu": F.selu,
    "celu": F.celu,
    "gelu": F.gelu,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "softsign": F.softsign,
    "tanh": torch.tanh,
    "hardtanh": F.hardtanh,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "logsigmoid": F.logsigmoid,
    "tanhshrink": F.tanhshrink,
    "softshrink": F.softshrink,
    "hardshrink": F.hardshrink,
    "rsqrt": torch.rsqrt,
    "erf": torch.erf,
}


def test_every_elementwise_operator_has_a_torch_twin_here():
    assert set(TORCH) == set(formulas.ELEMENTWISE)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_every_elementwise_formula_compiled_with_gpp_matches_torch(tmp_path):
    # Exactly the functions the prompt shows, in a file with no `using namespace std` of its own (a
    # kernel that pastes them may have none), called with their default arguments.
    functions = [formulas.cpp_function(name) for name in formulas.ELEMENTWISE]
    functions += [
        f'extern "C" void f_{name}(const float* x, float* y, long n) {{\n'
        f"    for (long i = 0; i < n; ++i) y[i] = {formulas.cpp_name(name)}(x[i]);\n}}\n"
        for name in formulas.ELEMENTWISE
    ]
    src = tmp_path / "formulas.cpp"
    src.write_text("#include <cmath>\n#include <algorithm>\n" + "\n".join(functions))
    lib_path = tmp_path / "formulas.so"
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-o", str(lib_path), str(src)], check=True, timeout=120)
    lib = ctypes.CDLL(str(lib_path))
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(4000, generator=gen) * 4, torch.tensor([0.0, -0.5, 0.5, 1.0, -1.0, 25.0, -25.0])])
    for name, reference in TORCH.items():
        inp = x.abs() + 0.1 if name == "rsqrt" else x
        out = torch.empty_like(inp)
        fn = getattr(lib, f"f_{name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        fn(inp.data_ptr(), out.data_ptr(), inp.numel())
        torch.testing.assert_close(out, reference(inp), atol=1e-5, rtol=1e-5, msg=lambda m, n=name: f"{n}: {m}")


def test_operators_whose_whole_body_is_given_get_no_example_kernel_and_the_others_the_element_example():
    for problem in ("layer_norm", "log_softmax", "l2_normalize", "rms_norm", "group_norm", "batch_norm_train"):
        source = (SUITE / f"{problem}.py").read_text()
        assert formulas.loop_bodied(source) and formulas.gives_whole_body(source), problem
        assert coder._kernel_system({"source": source}) == prompts.CODER_SYSTEM_KERNEL_GIVEN
    # One element-wise operator alone: its loop is given too (shown the example's relu_fn, the embedded
    # model wrote its own elu_fn beside PRAGMA's, wrong).
    for problem in ("elu", "sigmoid", "gelu_erf"):
        source = (SUITE / f"{problem}.py").read_text()
        assert not formulas.loop_bodied(source) and formulas.gives_whole_body(source), problem
        assert coder._kernel_system({"source": source}) == prompts.CODER_SYSTEM_KERNEL_GIVEN
    composed = "return torch.tanh(F.gelu(x))"  # two operators: the composition is the model's
    assert not formulas.gives_whole_body(composed)
    assert coder._kernel_system({"source": composed}) == prompts.CODER_SYSTEM_KERNEL
    # The skeleton names where the body comes from and holds no loop a model could copy instead.
    given = prompts.CODER_SYSTEM_KERNEL_GIVEN
    assert "/* the <formulas> body */" in given and "for (int64_t" not in given
    assert given.endswith(prompts.CODER_SYSTEM_KERNEL[-300:])  # the same rules


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize(
    "system, expected",
    [("CODER_SYSTEM_KERNEL", lambda x: torch.relu(x))],
)
def test_each_system_example_compiles_and_computes_what_it_says(tmp_path, monkeypatch, system, expected):
    # A small model copies the example: it must compile with the verifier's flags and compute the
    # operator its caption names.
    code = re.search(r"```cpp\n(.*?)```", getattr(prompts, system), re.DOTALL).group(1)
    fn = _build(tmp_path, monkeypatch, "example", code).pragma_kernel
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64] * 2
    x = torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) - 0.3
    out = torch.empty_like(x)
    fn(x.data_ptr(), 5, 7, out.data_ptr(), 5, 7)
    torch.testing.assert_close(out, expected(x))


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize(
    "problem", ["layer_norm", "rms_norm", "l2_normalize", "log_softmax", "batch_norm_train", "group_norm"]
)
def test_the_prompts_loop_in_the_problems_signature_is_a_verified_kernel(problem):
    # The <formulas> block exactly as the kernel prompt shows it for the suite's problem, pasted as
    # the body of the signature the prompt states, through the real verifier: a wrong name, size
    # or formula in what the model is told to paste would fail here before it fails a run.
    from pragma.graph.context import resolve_context
    from pragma.tools import glue
    from pragma.tools.problem import load_problem
    from pragma.tools.verify import verify_candidate

    loaded = load_problem(SUITE / f"{problem}.py")
    spec = glue.kernel_spec(loaded)
    section = coder._formulas_section(loaded, spec)
    block = re.search(r"```cpp\n(.*?)```", section, re.DOTALL)
    assert block and "#pragma omp parallel for" in block.group(1), section
    head = re.sub(r"//[^\n]*", "", glue.prototype(spec)).rstrip()
    cpp = glue.with_fast_forms(
        f"#include <algorithm>\n#include <cmath>\n#include <cstdint>\n{head} {{\n{block.group(1)}}}\n"
    )
    ctx = resolve_context(timed_calls=3, warmup_calls=1, warmup_s=0.05)
    result = verify_candidate(loaded["path"], glue.module_source(spec, cpp), ctx)
    assert result["status"] == "ok", result["message"]


ROW_TORCH = {
    "softmax": lambda x, w, b: torch.softmax(x, dim=1),
    "log_softmax": lambda x, w, b: torch.log_softmax(x, dim=1),
    "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[1],), w, b),
    "rms_norm": lambda x, w, b: F.rms_norm(x, (x.shape[1],), w),
    "normalize": lambda x, w, b: F.normalize(x, p=2.0, dim=1),
    "mean": lambda x, w, b: x.mean(dim=1, keepdim=True).expand_as(x),
}


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_every_row_body_compiled_with_gpp_inside_the_row_loop_matches_torch(tmp_path, monkeypatch):
    # Exactly the statements the prompt shows, inside the rows example's loop, with the verifier's
    # flags; `mean` computes a value per row, which the harness writes across the row to compare.
    assert set(ROW_TORCH) == set(formulas.ROW_BODIES)
    functions = []
    for name, body in formulas.ROW_BODIES.items():
        tail = "for (int64_t j = 0; j < n; ++j) out[j] = mean;" if name == "mean" else ""
        functions.append(
            f'extern "C" void f_{name}(const float* x, int64_t rows, int64_t n, const float* weight,'
            " const float* bias, float* out0) {\n"
            "    #pragma omp parallel for\n"
            "    for (int64_t r = 0; r < rows; ++r) {\n"
            "        const float* row = x + r * n;\n"
            "        float* out = out0 + r * n;\n"
            f"{body}\n{tail}\n"
            "    }\n}\n"
        )
    lib = _build(
        tmp_path,
        monkeypatch,
        "rows",
        "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n" + "\n".join(functions),
    )
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(6, 301, generator=gen) * 3 + 0.5
    w, b = torch.randn(301, generator=gen), torch.randn(301, generator=gen)
    for name, reference in ROW_TORCH.items():
        out = torch.empty_like(x)
        fn = getattr(lib, f"f_{name}")
        fn.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        fn(x.data_ptr(), 6, 301, w.data_ptr(), b.data_ptr(), out.data_ptr())
        torch.testing.assert_close(out, reference(x, w, b), msg=lambda m, n=name: f"{n}: {m}")


CHANNEL_TORCH = {
    "batch_norm": lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
    "group_norm": lambda x, w, b: F.group_norm(x, 3, w, b),
    "instance_norm": lambda x, w, b: F.instance_norm(x),
}


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_every_channel_body_compiled_with_gpp_matches_torch(tmp_path, monkeypatch):
    # The bodies as the prompt shows them for a 4-D input (3 groups for group_norm; instance_norm
    # without weight or bias, its default), with the verifier's flags.
    assert set(CHANNEL_TORCH) == set(formulas.CHANNEL_BODIES)
    functions = []
    for name in formulas.CHANNEL_BODIES:
        names = formulas.LoopNames(x="x", ndim=4, out="out0", weight="", bias="")
        if name != "instance_norm":
            names.update(weight="w", bias="b")
        functions.append(
            f'extern "C" void f_{name}(const float* x, int64_t x_dim0, int64_t x_dim1, int64_t x_dim2,'
            " int64_t x_dim3, const float* w, const float* b, float* out0) {\n"
            f"{formulas.channel_body(name, names, groups='3')}\n}}\n"
        )
    lib = _build(tmp_path, monkeypatch, "channels", "#include <cmath>\n#include <cstdint>\n" + "\n".join(functions))
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 6, 5, 7, generator=gen) * 2 + 0.3
    w, b = torch.randn(6, generator=gen), torch.randn(6, generator=gen)
    for name, reference in CHANNEL_TORCH.items():
        out = torch.empty_like(x)
        fn = getattr(lib, f"f_{name}")
        fn.argtypes = [ctypes.c_void_p, *[ctypes.c_int64] * 4, *[ctypes.c_void_p] * 3]
        fn(x.data_ptr(), *x.shape, w.data_ptr(), b.data_ptr(), out.data_ptr())
        torch.testing.assert_close(out, reference(x, w, b), msg=lambda m, n=name: f"{n}: {m}")
