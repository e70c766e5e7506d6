"""Model-independent repair hints: every verifier rule and failure status has a fixed instruction,
the real verifier's finding reaches the next Coder prompt, and with repair_advice=rules no model is
asked for advice."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import scripted
from conftest import EXAMPLES

from pragma.graph.context import resolve_context
from pragma.nodes import hints
from pragma.tools.judging import anticheat
from pragma.tools.judging.anticheat import RULES, Rule
from pragma.tools.verify import verify_candidate

# A module that calls the operator itself: rejected statically by no_torch_compute, with the line.
TORCH_RELU = """import torch
import torch.nn as nn
from pragma_cext import load_cpp, ptr

_lib = load_cpp('extern "C" void noop() {}', name="noop")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.relu()
"""


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_registered_rule_has_a_hint(rule):
    text = hints.rule_hint(rule, "line 3: something")
    assert text.startswith(f"rule {rule}: line 3: something: ") and len(text) > 60


def test_a_rule_registered_later_gets_a_generic_hint_from_its_rationale(monkeypatch):
    monkeypatch.setitem(
        RULES, "future_rule", Rule("future_rule", ("timing",), "Another process used the cores while timing ran.")
    )
    text = hints.rule_hint("future_rule", "load 1.9 during the timed rounds")
    assert "load 1.9 during the timed rounds" in text and "Another process used the cores" in text
    assert "future_rule" not in hints.RULE_HINTS  # really the generic path


@pytest.mark.parametrize("status", ["compile_error", "runtime_error", "mismatch", "timeout", "rejected"])
def test_every_failure_status_has_a_hint(status):
    text = hints.repair_hints(
        {
            "status": status,
            "message": "rule no_network: line 2: import socket"
            if status == "rejected"
            else "first line of the message",
            "checks": [],
        }
    )
    assert text.startswith("- ") and len(text) > 60
    assert hints.repair_hints({"status": "ok"}) == ""


def test_compile_error_hint_quotes_the_first_compiler_error():
    log = (
        "In function 'void k(const float*)':\n/tmp/b/relu_1.cpp:5:9: error: 'n' was not declared in this scope\n"
        "/tmp/b/relu_1.cpp:7:1: error: expected ';' before '}' token\n"
    )
    text = hints.repair_hints({"status": "compile_error", "message": "CompileError: " + log})
    assert "relu_1.cpp:5:9: error: 'n' was not declared" in text and "expected ';'" not in text


def test_known_compiler_errors_get_a_specific_fix():
    # g++'s own quotes (as the embedded model's copied kernel produced) and ASCII ones.
    undeclared = (
        "CompileError: /r/pragma_kernel_7e.cpp:8:12: error: ‘i’ was not declared in this scope\n"
        "    8 |     for (; i < n; ++i) out0[i] = x[i];\n"
    )
    text = hints.repair_hints({"status": "compile_error", "message": undeclared}, "kernel")
    assert "declare `i` before its first use" in text and "int64_t i = 0;" in text
    assert "pragma_kernel_7e.cpp:8:12" in text  # where, then what to do
    conv = "/r/k.cpp:3:5: error: invalid conversion from 'const float*' to 'float*' [-fpermissive]"
    assert "static_cast<float*>" in hints.repair_hints({"status": "compile_error", "message": conv})
    # g++ 12's words for collapse(2) over a loop whose body starts with a declaration; the
    # undeclared index it reports next is a consequence, not the fix.
    collapse = (
        "CompileError: /b/pragma_kernel_de.cpp:26:5: error: not enough for loops to collapse\n"
        "   26 |     double s = 0.0;\n"
        "/b/pragma_kernel_de.cpp:30:9: error: ‘c’ was not declared in this scope\n"
    )
    text = hints.repair_hints({"status": "compile_error", "message": collapse}, "kernel")
    assert "remove the `collapse(...)` clause" in text and "declare `c`" not in text
    other = "/r/k.cpp:3:5: error: 'foo' has not been declared"
    assert "before its first use" not in hints.repair_hints({"status": "compile_error", "message": other})


def _compile_hint(message: str) -> str:
    return hints.repair_hints({"status": "compile_error", "message": f"CompileError: {message}"}, "kernel")


def test_openmp_clause_errors_the_embedded_model_repeated_get_a_fix_that_names_the_clause():
    # What g++ 12 said to the embedded model's refinements in emb1128b (each repeated 2-3 times).
    array = "/b/k.cpp:39:32: error: user defined reduction not found for ‘out0’\n   39 | #pragma omp simd reduction(* : out0)\n"
    text = _compile_hint(array)
    assert "`reduction(... : out0)` names `out0`, an array or pointer" in text and "remove that clause" in text
    nested = (
        "/b/k.cpp:17:9: error: OpenMP constructs other than ‘ordered simd’, ‘simd’, ‘loop’ or "
        "‘atomic’ may not be nested inside ‘simd’ region\n   17 | #pragma omp parallel for simd\n"
    )
    text = _compile_hint(nested)
    assert "keep `#pragma omp parallel for` on the outer loop alone" in text
    for name, line in (
        ("x_i", "#pragma omp parallel for simd private(x_i) schedule(static)"),
        ("i", "#pragma omp parallel for simd collapse(TILE) private(i) shared(out0)"),
    ):
        clause = f"/b/k.cpp:16:54: error: ‘{name}’ has not been declared\n   16 | {line}\n"
        text = _compile_hint(clause)
        assert f"names `{name}` in a clause" in text and "remove that clause" in text, text
        assert "before its first use" not in text
    # One of PRAGMA's forms, defined by the model below its kernel (so PRAGMA added none): delete yours.
    own = "/b/k.cpp:20:23: error: ‘leaky_relu_fn’ was not declared in this scope\n   20 |  out0[i] = leaky_relu_fn(x[i], 0.2f);\n"
    assert "delete your own definition of `leaky_relu_fn`" in _compile_hint(own)
    assert "calls a function that does not exist" in _compile_hint(own.replace("leaky_relu_fn", "inv_sqrt"))
    # An error in a function of the model's own, not the kernel: delete it (rms_norm, emb1128b).
    extra = (
        "/b/k.cpp:29:20: error: ‘out0_dim0’ was not declared in this scope\n"
        "/b/k.cpp: In function ‘void debug_check(const float*, const float*, const float*)’:\n"
        "/b/k.cpp:29:20: error: ‘out0_dim0’ was not declared in this scope\n   29 |     int64_t rows = out0_dim0;\n"
    )
    assert "the first error is in `debug_check`, not in pragma_kernel: delete `debug_check`" in _compile_hint(extra)
    in_kernel = extra.replace(
        "void debug_check(const float*, const float*, const float*)", "void pragma_kernel(const float*)"
    )
    assert "not in pragma_kernel" not in _compile_hint(in_kernel)
    # An undeclared name in the loop itself still gets the declaration advice.
    loop = "/b/k.cpp:16:38: error: ‘TILE’ was not declared in this scope\n   16 |   n / TILE;\n"
    assert "declare `TILE` before its first use" in _compile_hint(loop)


def test_a_mismatch_that_skipped_the_given_fast_form_is_told_to_call_it():
    # silu in emb1128b: given `out0[i] = silu_fn(x[i]);`, the model wrote its own (wrong) sigmoid.
    own = "out0[i] = v * ((1.0f + exp(-v)) / 2.0f);"
    mismatch = {"status": "mismatch", "message": "trial 0: output 0: 8194670 of 8198000 elements differ"}
    hint = hints.unused_form_hint(mismatch, {"given_call": "silu_fn", "kernel": own})
    assert "your kernel does not call `silu_fn`" in hint and "pragma_fast.h" in hint
    assert hints.unused_form_hint(mismatch, {"given_call": "silu_fn", "kernel": "out0[i] = silu_fn (x[i]);"}) == ""
    assert (
        hints.unused_form_hint({**mismatch, "status": "compile_error"}, {"given_call": "silu_fn", "kernel": own}) == ""
    )
    assert hints.unused_form_hint(mismatch, {"kernel": own}) == ""  # no body was given


def test_python_in_the_cpp_kernel_is_named_with_the_line_and_what_to_write_instead():
    # The embedded model's ELU (issue 14): PyTorch calls inside the C++ loop.
    log = (
        "CompileError: /b/pragma_kernel_3d.cpp:13:47: error: ‘F’ was not declared in this scope\n"
        "/b/pragma_kernel_3d.cpp: In function ‘void pragma_kernel(const float*, int64_t)’:\n"
        "/b/pragma_kernel_3d.cpp:13:47: error: ‘F’ was not declared in this scope\n"
        "   13 |     for (int64_t i = 0; i < n; ++i) out0[i] = F.elu(x[i], alpha=1.0);\n"
        "      |                                               ^\n"
    )
    text = hints.repair_hints({"status": "compile_error", "message": log}, "kernel")
    assert "`F` is Python (PyTorch), and C++ cannot call it" in text and "std::exp" in text
    assert "declare `F`" not in text  # the loop-index advice the model followed into the same error
    assert "(the line: `for (int64_t i = 0; i < n; ++i) out0[i] = F.elu(x[i], alpha=1.0);`)" in text
    torch_log = "/b/k.cpp:19:19: error: 'torch' was not declared in this scope\n   19 |   out0[i] = torch.relu(x[i]);\n"
    assert "`torch` is Python" in hints.repair_hints({"status": "compile_error", "message": torch_log})
    # Comment text pasted as code (copied from a verified kernel's comment).
    prose = (
        "/b/k.cpp:14:6: error: ‘max’ in namespace ‘std’ does not name a type\n"
        '   14 | std::max under "#pragma omp simd" made g++ emit a branchy scalar loop (38 ms).\n'
    )
    text = hints.repair_hints({"status": "compile_error", "message": prose}, "kernel")
    assert "not a C++ statement" in text and "`//` comment" in text and "std::max under" in text
    # An undeclared name called as a function is not a loop index.
    call = (
        "/b/k.cpp:18:60: error: ‘inv_sqrt’ was not declared in this scope\n"
        "   18 |     out0[i] = (x[i] - m[c]) * inv_sqrt(v[c]);\n"
    )
    text = hints.repair_hints({"status": "compile_error", "message": call}, "kernel")
    assert "`inv_sqrt(...)` calls a function that does not exist" in text and "int64_t inv_sqrt" not in text
    # A reduction clause over a variable that does not exist (g++'s real wording): remove the clause.
    clause = (
        "red.cpp:5:47: error: ‘sum’ has not been declared\n"
        "    5 |     #pragma omp parallel for simd reduction(+:sum)\n"
        "      |                                               ^~~\n"
    )
    text = hints.repair_hints({"status": "compile_error", "message": clause}, "kernel")
    assert "needs no reduction clause (remove it)" in text and "(the line: `#pragma omp parallel" in text
    # A C++ name the model forgot stays the loop-index advice.
    plain = "/b/k.cpp:8:12: error: 'i' was not declared in this scope\n"
    assert "declare `i` before its first use" in hints.repair_hints({"status": "compile_error", "message": plain})


def test_kernel_format_rewords_python_side_findings():
    text = hints.rule_hint("no_torch_compute", "line 9: calls .relu()", fmt="kernel")
    assert "line 9: calls .relu()" in text and "C++ function" in text


def _spy(monkeypatch, script):
    from pragma.nodes import llm

    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(script))
    seen: list[tuple[str, str]] = []
    real = scripted.ScriptedChatModel._generate

    def spy(self, messages, *args, **kwargs):
        seen.append((self.role, "\n".join(str(m.content) for m in messages)))
        return real(self, messages, *args, **kwargs)

    monkeypatch.setattr(scripted.ScriptedChatModel, "_generate", spy)
    return seen


def _reject_then_repair(monkeypatch, script, **ctx):
    from pragma.nodes import coder, repair

    seen = _spy(monkeypatch, script)
    runtime = SimpleNamespace(context=resolve_context(coder_model="scripted:x", **ctx))
    source = (EXAMPLES / "relu.py").read_text()
    state = {
        "problem": {
            "name": "relu",
            "path": str(EXAMPLES / "relu.py"),
            "source": source,
            "inputs": [{"kind": "tensor", "shape": [1000, 8191], "dtype": "float32"}],
        },
        "iteration": 0,
    }
    state.update(coder.coder(state, runtime))
    state["verification"] = verify_candidate(state["problem"]["path"], state["candidate"]["code"], runtime.context)
    assert state["verification"]["status"] == "rejected"
    assert state["verification"]["message"].startswith("rule no_torch_compute: line 13")
    state.update(repair.repair(state, runtime))
    coder.coder(state, runtime)
    return state, seen


def test_rule_hint_reaches_the_next_coder_prompt_without_asking_a_model(monkeypatch):
    script = {"coder": {"1": f"```python\n{TORCH_RELU}```", "2": "```python\n# next\n```"}}  # no conductor
    state, seen = _reject_then_repair(monkeypatch, script, repair_advice="rules")
    assert [role for role, _ in seen] == ["coder", "coder"]
    nxt = seen[-1][1]
    assert "<repair_instructions>" in nxt and "rule no_torch_compute: line 13" in nxt
    assert "compute the result in the C++ kernel" in nxt
    assert state["log"][-1]["source"] == "rules" and state["log"][-1]["output_tokens"] == 0


def test_rules_plus_model_shows_the_hints_to_the_conductor_and_keeps_both(monkeypatch):
    script = {
        "coder": {"1": f"```python\n{TORCH_RELU}```", "2": "```python\n# next\n```"},
        "conductor": {"1": "Write the loop in C++ and return its output."},
    }
    state, seen = _reject_then_repair(monkeypatch, script, repair_advice="rules+model")
    assert [role for role, _ in seen] == ["coder", "conductor", "coder"]
    assert "<verifier_hints>" in seen[1][1] and "compute the result in the C++ kernel" in seen[1][1]
    guidance = state["guidance"]["text"]
    assert guidance.index("rule no_torch_compute") < guidance.index("Write the loop in C++")


def test_repair_advice_auto_is_rules_for_the_local_model_only():
    from pragma.nodes.repair import advice_mode

    assert advice_mode(resolve_context(coder_model="local")) == "rules"
    assert advice_mode(resolve_context(coder_model="openai:big")) == "rules+model"
    assert advice_mode(resolve_context(coder_model="local", repair_advice="rules+model")) == "rules+model"


def test_static_rejections_name_a_rule_the_hints_know():
    checks = anticheat.static_checks(TORCH_RELU, (EXAMPLES / "relu.py").read_text())
    failed = anticheat.first_failure(checks)
    assert failed and failed["rule"] in hints.RULE_HINTS


def test_a_kernel_reply_without_the_function_is_told_to_write_the_whole_file():
    # What the verifier says about the placeholder PRAGMA writes for such a reply (no load_cpp).
    rejected = {
        "status": "rejected",
        "message": "rule has_compiled_kernel: no call to load_cpp, load_inline or cpp_extension.load",
    }
    assert "held no C++ function" in hints.repair_hints(rejected, "kernel")
    assert "load_cpp(CPP_SOURCE" in hints.repair_hints(rejected, "module")


def test_a_kernel_that_writes_only_the_first_rows_is_told_to_loop_over_rows():
    # tools/judging/compare.py's own message for a kernel without its row loop (row 0 right, rows 1.. left
    # as allocated), and the hint it gets; a mismatch spread over the rows gets neither.
    import torch

    from pragma.tools.judging import compare

    assert hints.FIRST_ROWS_ONLY == compare.FIRST_ROWS_ONLY
    ref = torch.randn(5, 7)
    one_row = torch.zeros(5, 7)
    one_row[0] = ref[0]
    result = compare.compare(ref, one_row, 1e-4, 1e-4, [ref])
    assert "only the first 1 of 5 rows match, every later row differs" in result["message"]
    text = hints.repair_hints({"status": "mismatch", "message": f"trial 0: {result['message']}"}, "kernel")
    assert "first row(s) only" in text and "for (int64_t r = 0; r < rows; ++r)" in text
    assert "paste that loop with its bound unchanged" in text  # a group norm's loop is over N * G, not rows
    for wrong in (ref * 2, torch.cat([ref[:2] * 2, ref[2:]]), torch.cat([ref[:2], ref[2:3] * 2, ref[3:]])):
        message = compare.compare(ref, wrong, 1e-4, 1e-4, [ref])["message"]
        assert "rows match" not in message
        assert "first row(s) only" not in hints.repair_hints({"status": "mismatch", "message": message}, "kernel")
    flat = compare.compare(ref.reshape(-1), torch.zeros(35), 1e-4, 1e-4)["message"]
    assert "rows match" not in flat  # a 1-D output has no rows


def test_nan_where_the_reference_is_finite_says_where_nan_comes_from():
    # The message tools/judging/compare.py writes (its wording, checked against the constant here).
    from pragma.tools.judging import compare

    assert hints.NAN_WHERE_FINITE in inspect.getsource(compare)
    message = (
        "trial 0: output 0: 6141450 of 6143047 elements differ beyond atol=0.0001, rtol=0.0001 (max abs diff 31.1; "
        "3060265 NaN/Inf where the reference is finite); first: at [0, 0]: expected -0.01899, got nan"
    )
    text = hints.repair_hints({"status": "mismatch", "message": message}, "kernel")
    assert "square root or log of a value that can be negative" in text
    plain = hints.repair_hints({"status": "mismatch", "message": "trial 0: output 0: 5 of 9 elements differ"}, "kernel")
    assert "square root" not in plain


@pytest.mark.integration  # load_problem probes in a subprocess; the verifier builds and loads the .so
def test_a_kernel_declared_but_never_defined_gets_a_repair_that_names_the_fix():
    """The embedded model (make demo, ReLU, attempt 1) pasted pragma_kernel's signature and ended it
    with `;`: g++ built the library (a shared library may leave symbols undefined) and loading it
    failed with `undefined symbol: pragma_kernel`; the generic runtime advice said to check indices."""
    import re

    from pragma.tools import glue
    from pragma.tools.problem import load_problem

    loaded = load_problem(EXAMPLES / "relu.py")
    spec = glue.kernel_spec(loaded)
    cpp = "#include <cstdint>\n" + re.sub(r"//[^\n]*", "", glue.prototype(spec)).rstrip() + ";\n"
    assert cpp.rstrip().endswith(";")  # the declaration alone, as the model wrote it
    result = verify_candidate(loaded["path"], glue.module_source(spec, cpp), resolve_context(timed_calls=3))
    assert result["status"] == "runtime_error" and "undefined symbol: pragma_kernel" in result["message"]
    text = hints.repair_hints(result, "kernel")
    assert "`pragma_kernel` is declared but has no body" in text and "replace that `;` by `{ ... }`" in text
