"""Static anti-cheat rules on small sources (no code runs), and the rules' documentation."""

import textwrap

import pytest
from conftest import CANDIDATES, ROOT

from pragma.tools.judging.anticheat import RULES, STATIC_RULES, static_checks

HEADER = textwrap.dedent("""
    import ctypes
    import torch
    import torch.nn.functional as F
    from torch import nn
    from pragma_cext import load_cpp, ptr
    _lib = load_cpp('extern "C" void k(const float* x, float* y, long n) {}', name="k")
""")


def failed(body: str, problem_source: str = "") -> dict[str, str]:
    checks = static_checks(HEADER + textwrap.dedent(body), problem_source)
    return {c["rule"]: c["detail"] for c in checks if c["verdict"] == "fail"}


def model(forward_body: str, init_body: str = "pass") -> str:
    return (
        f"class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"        {init_body}\n    def forward(self, x):\n" + textwrap.indent(textwrap.dedent(forward_body), "        ")
    )


@pytest.mark.parametrize("name", sorted(p.name for p in CANDIDATES.glob("*.py")))
def test_spine_fixtures_break_no_static_rule(name):
    checks = static_checks((CANDIDATES / name).read_text())
    assert [c for c in checks if c["verdict"] == "fail"] == []
    assert {c["rule"] for c in checks} == set(STATIC_RULES)


@pytest.mark.parametrize(
    "forward, rule",
    [
        ("return F.relu(x)", "no_torch_compute"),
        ("return x.clamp(min=0)", "no_torch_compute"),
        ("return x @ x.t()", "no_torch_compute"),
        ("return torch.ops.aten.relu(x)", "no_torch_compute"),
        ("try:\n    y = torch.empty_like(x)\nexcept Exception:\n    y = None\nreturn y", "no_try_fallback"),
        ("self.cache = x\nreturn x", "no_state_across_calls"),
        ("import os\nos.environ['OMP_NUM_THREADS'] = '8'\nreturn x", "no_monkeypatching"),
        ("torch.set_num_threads(8)\nreturn x", "thread_budget"),
        ("torch.set_flush_denormal(True)\nreturn x", "fp_environment"),
        ("return eval('torch.relu')(x)", "no_dynamic_code"),
        ("import sys\nreturn sys.modules['pragma_problem'].Model()(x)", "no_introspection"),
        ("return x.half().float()", "no_precision_downgrade"),
        ("return x.to(torch.bfloat16)", "no_precision_downgrade"),
        ("open('out.bin', 'wb').write(b'')\nreturn x", "no_filesystem_writes"),
        ("import socket\nreturn x", "no_network"),
        ("import subprocess\nreturn x", "no_threads_or_processes"),
        ("return x.as_subclass(torch.Tensor)", "no_tensor_subclass"),
    ],
)
def test_forward_violations(forward, rule):
    assert rule in failed(model(forward))


def test_glue_is_allowed():
    body = model(
        """
        x = x.contiguous().view(-1)
        y = torch.empty(x.shape, dtype=x.dtype)
        z = torch.zeros_like(y)
        n = x.numel() * x.element_size() + x.size(0)
        _lib.k(ptr(x), ptr(y), n)
        return y.reshape(z.shape).view_as(y)
    """,
        init_body="self.w = nn.Parameter(torch.empty(3)); nn.init.zeros_(self.w); self.lin = nn.Linear(2, 2)",
    )
    assert failed(body) == {}


def test_calls_into_the_compiled_library_are_not_torch_compute_whatever_their_name():
    assert failed(model("_lib.relu(ptr(x))\nreturn x")) == {}
    assert (
        failed(
            "class M:\n    def __init__(self):\n        self.ext = load_cpp('')\n"
            "    def forward(self, x):\n        return self.ext.softmax(x)\n"
        )
        == {}
    )


def test_no_kernel_at_all_is_rejected():
    checks = static_checks(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.zeros_like(x)\n"
    )
    assert {c["rule"] for c in checks if c["verdict"] == "fail"} == {"has_compiled_kernel"}


def test_cpp_source_rules_ignore_comments_and_see_code():
    quiet = failed(
        'SRC = r"""\n#include <cstdint>\n// no -ffast-math, no std::thread here\nextern "C" void k() {}\n"""\n'
    )
    assert quiet == {}
    loud = failed(
        'SRC = r"""\n#include <cstdint>\n#pragma GCC optimize("fast-math")\n'
        'extern "C" void k(float* y) { FILE* f = fopen("/tmp/x", "w"); omp_set_num_threads(8); }\n"""\n'
    )
    assert {"no_fast_math", "no_filesystem_writes", "thread_budget"} <= set(loud)


def test_flags_are_checked_wherever_they_are_written():
    assert "no_fast_math" in failed('FLAGS = ("-O3", "-Ofast")\n_l2 = load_cpp("", extra_flags=FLAGS)\n')
    assert "no_fast_math" in failed('_l2 = load_cpp("", extra_flags=["-O3 -ffast-math"])\n')
    assert failed('_l2 = load_cpp("", extra_flags=["-O0", "-funroll-loops"])\n') == {}


def test_precision_rule_follows_the_problem_dtype():
    src = model("return x.half()")
    assert "no_precision_downgrade" in failed(src, "return [torch.randn(4)]")
    checks = static_checks(HEADER + src, "return [torch.randn(4, dtype=torch.float16)]")
    assert {c["rule"]: c["verdict"] for c in checks}["no_precision_downgrade"] == "skip"


def test_syntax_errors_are_left_to_the_build():
    checks = static_checks("def broken(:\n")
    assert checks and all(c["verdict"] == "skip" for c in checks)


def test_every_rule_has_a_rationale_and_a_row_in_the_docs():
    doc = (ROOT / "docs" / "verifier.md").read_text()
    for name, rule in RULES.items():
        assert len(rule.rationale) > 60, name
        assert f"`{name}`" in doc, f"docs/verifier.md does not document {name}"


_INIT_W = "self.weight = nn.Parameter(torch.ones(4, 4)); self.packed = None"


@pytest.mark.parametrize(
    "forward",
    [
        # weights packed once on the first call: state that depends on parameters only (issue 33)
        "if self.packed is None:\n    self.packed = self.weight.detach().contiguous()\ny = torch.empty_like(x)\n"
        "_lib.k(ptr(x), ptr(y), x.numel())\nreturn y",
        "if self.packed is None:\n    w = self.weight.detach()\n    self.packed = w.contiguous()\nreturn x",
    ],
)
def test_parameter_only_state_is_allowed(forward):
    assert "no_state_across_calls" not in failed(model(forward, _INIT_W))


@pytest.mark.parametrize(
    "forward",
    [
        "self.packed = x\nreturn x",  # the input itself
        "self.packed = self.weight.detach() + x.sum()\nreturn x",  # anything derived from it
        "k = x.shape\nself.packed = (self.weight, k)\nreturn x",  # through a local
        # through a buffer the kernel wrote from the input (a pointer argument beside the input's)
        "y = torch.empty_like(self.weight)\n_lib.k(ptr(x), ptr(y), 16)\nself.packed = y\nreturn y",
        "for v in x:\n    self.packed = self.weight.detach()[0] if v is None else v\nreturn x",
        "self.packed = True\nreturn x",  # a constant: a flag that switches behaviour after a call
        "self.packed = self.packed + self.weight\nreturn x",  # its own old value (a counter, an accumulator)
        "self.packed += self.weight\nreturn x",
        "del self.packed\nreturn x",
    ],
)
def test_state_from_inputs_flags_and_counters_stays_refused(forward):
    assert "no_state_across_calls" in failed(model(forward, _INIT_W))
