"""Kernel-only candidates (candidate_format=kernel): PRAGMA's generated module around real C++
kernels, checked by the real verifier (g++ builds, the sandbox, the anti-cheat rules), exported to a
standalone best.py, and the fallback to module format for problems a lone kernel cannot serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import scripted
from conftest import EXAMPLES

from pragma.graph.context import resolve_context
from pragma.tools import glue
from pragma.tools.export import standalone_source
from pragma.tools.problem import load_problem
from pragma.tools.verify import verify_candidate

PROBLEMS = Path(__file__).parent / "data" / "problems"

GATHER_CPP = r"""
#include <cstdint>
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              const int64_t* idx, int64_t idx_dim0, int64_t shift,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1, double alpha) {
    for (int64_t r = 0; r < idx_dim0; ++r) {
        const float* row = x + idx[r] * x_dim1;
        for (int64_t c = 0; c < x_dim1; ++c) out0[r * out0_dim1 + c] = row[c] * (float)alpha + (float)shift;
    }
}
"""
# What the Coder keeps of a reply holding GATHER_CPP: PRAGMA adds the standard headers it lacks.
GATHERED = glue.with_standard_headers(GATHER_CPP.strip() + "\n")

ROW_STATS_CPP = r"""
#include <cstdint>
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t* out1, int64_t out1_dim0,
                              float* out2, int64_t out2_dim0, int64_t out2_dim1) {
    for (int64_t i = 0; i < x_dim0; ++i) {
        const float* row = x + i * x_dim1;
        float best = row[0];
        int64_t at = 0;
        for (int64_t j = 0; j < x_dim1; ++j) {
            if (row[j] > best) { best = row[j]; at = j; }
            out2[i * x_dim1 + j] = row[j] > 0.0f ? row[j] : 0.0f;
        }
        out0[i] = best;
        out1[i] = at;
    }
}
"""


LINEAR_RELU_CPP = r"""
#include <cstdint>
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              const float* fc_weight, int64_t fc_weight_dim0, int64_t fc_weight_dim1,
                              const float* fc_bias, int64_t fc_bias_dim0,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    for (int64_t i = 0; i < x_dim0; ++i)
        for (int64_t o = 0; o < fc_weight_dim0; ++o) {
            float s = fc_bias[o];
            for (int64_t k = 0; k < x_dim1; ++k) s += x[i * x_dim1 + k] * fc_weight[o * fc_weight_dim1 + k];
            out0[i * out0_dim1 + o] = s > 0.0f ? s : 0.0f;
        }
}
"""


@pytest.fixture(scope="module")
def probed():
    return {
        name: load_problem(PROBLEMS / f"{name}.py")
        for name in ("gather_scale", "row_stats", "linear_relu", "helper_init")
    }


def _ctx(**kw):
    return resolve_context(timed_calls=5, warmup_calls=1, warmup_s=0.05, **kw)


def test_probe_describes_outputs_and_state(probed):
    rows = probed["row_stats"]
    assert rows["outputs"]["container"] == "tuple"
    assert [(y["shape"], y["dtype"]) for y in rows["outputs"]["items"]] == [
        ([50], "float32"),
        ([50], "int64"),
        ([50, 77], "float32"),
    ]
    assert probed["linear_relu"]["state_names"] == ["fc.weight", "fc.bias"]
    assert probed["linear_relu"]["state"][0] == {
        "name": "fc.weight",
        "kind": "tensor",
        "shape": [8, 16],
        "dtype": "float32",
    }
    assert probed["gather_scale"]["inputs"][2] == {"kind": "int", "value": "3"}


def test_signature_states_pointers_dtypes_sizes_and_scalars(probed):
    proto = glue.prototype(glue.kernel_spec(probed["gather_scale"]))
    for decl in (
        "const float* x, int64_t x_dim0, int64_t x_dim1",
        "const int64_t* idx, int64_t idx_dim0",
        "int64_t shift",
        "float* out0, int64_t out0_dim0, int64_t out0_dim1",
        "double alpha",
    ):
        assert decl in proto
    # Arguments in the order the glue passes them: forward inputs, outputs, constructor arguments.
    assert proto.index("shift") < proto.index("out0") < proto.index("alpha")


@pytest.mark.integration
@pytest.mark.parametrize(
    "name,cpp", [("gather_scale", GATHER_CPP), ("row_stats", ROW_STATS_CPP), ("linear_relu", LINEAR_RELU_CPP)]
)
def test_generated_module_passes_the_real_verifier(probed, name, cpp):
    code = glue.module_source(glue.kernel_spec(probed[name]), cpp)
    result = verify_candidate(probed[name]["path"], code, _ctx())
    assert result["status"] == "ok", result["message"]
    assert glue.kernel_of(code) == cpp.strip("\n") + "\n"


@pytest.mark.integration
def test_a_prebuilt_kernel_is_the_build_its_verification_loads(probed, isolated_data_dir):
    # Issue 16: a search round compiles its kernel-format candidates in parallel (nodes/search.py
    # expand), in the sandbox, into the cache the verification then loads from.
    from pragma.tools.verify import build_env, prebuild_kernel

    cpp = GATHERED.replace("(float)alpha", "(float)(alpha * 1.0)")  # a source no other test built
    assert prebuild_kernel(probed["gather_scale"]["path"], cpp, glue.ENTRY, _ctx()) == "ok"
    cache = Path(build_env()["PRAGMA_BUILD_DIR"])
    [built] = list(cache.glob(f"{glue.ENTRY}_*.so"))
    mtime = built.stat().st_mtime_ns
    code = glue.module_source(glue.kernel_spec(probed["gather_scale"]), cpp)
    result = verify_candidate(probed["gather_scale"]["path"], code, _ctx())
    assert result["status"] == "ok", result["message"]
    assert [b["so_path"] for b in result["builds"] if b.get("kind") == "cext"] == [str(built)]
    assert built.stat().st_mtime_ns == mtime  # loaded, not rebuilt
    broken = cpp.replace("int64_t shift", "int64_t shift,,")
    assert prebuild_kernel(probed["gather_scale"]["path"], broken, glue.ENTRY, _ctx()) == "compile_error"


@pytest.mark.integration
def test_a_wrong_kernel_in_the_glue_is_a_mismatch(probed):
    wrong = GATHER_CPP.replace("(float)alpha + (float)shift", "(float)alpha")  # forgets the shift
    result = verify_candidate(
        probed["gather_scale"]["path"], glue.module_source(glue.kernel_spec(probed["gather_scale"]), wrong), _ctx()
    )
    assert result["status"] == "mismatch"


@pytest.mark.integration
def test_generated_module_exports_to_a_standalone_best_py(probed, tmp_path):
    code = glue.module_source(glue.kernel_spec(probed["row_stats"]), ROW_STATS_CPP)
    best = tmp_path / "best.py"
    best.write_text(standalone_source(code))
    script = f"""
import importlib.util, sys, torch
sys.path.insert(0, {str(PROBLEMS)!r})
import row_stats
spec = importlib.util.spec_from_file_location("best", {str(best)!r})
best = importlib.util.module_from_spec(spec); spec.loader.exec_module(best)
x = row_stats.get_inputs()[0]
got, want = best.ModelNew()(x), row_stats.Model()(x)
assert all(torch.equal(a, b) for a, b in zip(got, want)), "outputs differ"
print("same")
"""
    env = {**os.environ, "PRAGMA_BUILD_DIR": str(tmp_path / "build")}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0 and "same" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.integration
def test_learned_weights_come_from_the_reference_constructor_as_pointers(probed):
    spec = glue.kernel_spec(probed["linear_relu"])
    proto = glue.prototype(spec)
    assert "const float* fc_weight, int64_t fc_weight_dim0, int64_t fc_weight_dim1" in proto
    assert proto.index("fc_bias") < proto.index("out0")
    code = glue.module_source(spec, LINEAR_RELU_CPP)
    assert "IN_FEATURES = 16" in code and "self.fc = nn.Linear(IN_FEATURES, 8)" in code
    assert "ptr(self.fc.weight)" in code and "self.fc(" not in code  # built, never called
    # A kernel that ignores the bias is wrong: the weights really reach the kernel.
    wrong = LINEAR_RELU_CPP.replace("float s = fc_bias[o];", "float s = 0.0f;")
    result = verify_candidate(probed["linear_relu"]["path"], glue.module_source(spec, wrong), _ctx())
    assert result["status"] == "mismatch"


@pytest.mark.parametrize(
    "change,reason",
    [
        ({"state_names": ["fc.weight"]}, "did not describe them"),
        (
            {"outputs_alt": {"container": "", "items": [{"kind": "tensor", "shape": [7], "dtype": "int64"}]}},
            "data-dependent",
        ),
        ({"outputs": {"container": "", "items": [{"kind": "float", "value": "1.0"}]}}, "not a tensor"),
        ({"inputs": [{"kind": "tensor", "shape": [4], "dtype": "float16"}]}, "float16"),
        ({"outputs": None}, "without output descriptions"),
    ],
)
def test_problems_a_lone_kernel_cannot_serve_fall_back(change, reason):
    base = {
        "name": "p",
        "source": "",
        "inputs": [{"kind": "tensor", "shape": [4], "dtype": "float32"}],
        "init_inputs": [],
        "outputs": {"container": "", "items": [{"kind": "tensor", "shape": [4], "dtype": "int64"}]},
        "state_names": [],
    }
    assert glue.unsupported_reason(base) is None
    assert reason in glue.unsupported_reason({**base, **change})


def test_extract_kernel_takes_the_cpp_block_defining_the_entry():
    reply = "Explanation.\n```cpp\nint helper();\n```\nThen:\n```cpp\n" + GATHER_CPP + "```\n"
    full = glue.with_standard_headers(GATHER_CPP.strip() + "\n")
    assert glue.extract_kernel(reply).strip() == full.strip()
    assert glue.extract_kernel("```cpp\n" + GATHER_CPP).strip() == full.strip()  # cut at max_tokens


def test_the_standard_headers_a_model_forgets_are_added_once():
    cpp = 'extern "C" void pragma_kernel(const float* x, float* y, int64_t n) {\n'
    cpp += "    for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));\n}\n"
    got = glue.extract_kernel(f"```cpp\n{cpp}```")
    assert got.startswith("#include <cmath>\n") and got.endswith(cpp) and got.count("#include <cmath>") == 1
    assert glue.with_standard_headers(got) == got
    assert glue.with_standard_headers("#include  <cmath>\n" + cpp).count("<cmath>") == 1
    with pytest.raises(glue.KernelExtractionError):
        glue.extract_kernel("```python\nclass ModelNew: pass\n```")


# The embedded model's first reply for the suite's l2_normalize (issue 14, run at 8c76e26): the
# prompt's row loop pasted as the body, the function's own closing brace left out.
L2_REPLY_WITHOUT_LAST_BRACE = """```cpp
#include <algorithm>
#include <cmath>
#include <cstdint>
extern "C" void pragma_kernel(
    const float* x, int64_t x_dim0, int64_t x_dim1,  // input; float32 [3001 x 2047], contiguous row-major
    float* out0, int64_t out0_dim0, int64_t out0_dim1  // output, allocated by PRAGMA: write every element
) {
    const int64_t rows = x_dim0;  // the number of rows
#pragma omp parallel for
for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * x_dim1;  // the input row
    float* out = out0 + r * x_dim1;  // the output row
    const float eps = 1e-12f;  // F.normalize(p=2.0, dim=1)'s default
    double q = 0.0;
    for (int64_t j = 0; j < x_dim1; ++j) q += (double)row[j] * row[j];
    const float norm = std::max((float)std::sqrt(q), eps);
    for (int64_t j = 0; j < x_dim1; ++j) out[j] = row[j] / norm;
}
```"""


def test_closing_braces_a_model_leaves_out_at_the_end_are_added():
    got = glue.extract_kernel(L2_REPLY_WITHOUT_LAST_BRACE)
    assert got.endswith("    for (int64_t j = 0; j < x_dim1; ++j) out[j] = row[j] / norm;\n}\n}\n")
    assert glue.with_closed_braces(got) == got  # balanced: unchanged
    # Braces in comments and literals are not counted; an extra closing brace is left to g++.
    assert glue.with_closed_braces('void f() { // {\n const char* s = "{";\n}\n').endswith('"{";\n}\n')
    assert glue.with_closed_braces("void f() { }\n}\n") == "void f() { }\n}\n"


@pytest.mark.integration
def test_the_completed_reply_is_a_verified_kernel():
    problem = load_problem(Path(__file__).parents[1] / "eval" / "suites" / "cpu" / "l2_normalize.py")
    code = glue.module_source(glue.kernel_spec(problem), glue.extract_kernel(L2_REPLY_WITHOUT_LAST_BRACE))
    result = verify_candidate(problem["path"], code, _ctx())
    assert result["status"] == "ok", result["message"]


def _coder_runtime(monkeypatch, script, **ctx):
    from pragma.nodes import llm

    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(script))
    seen: list[str] = []
    real = scripted.ScriptedChatModel._generate

    def spy(self, messages, *args, **kwargs):
        seen.append("\n".join(str(m.content) for m in messages))
        return real(self, messages, *args, **kwargs)

    monkeypatch.setattr(scripted.ScriptedChatModel, "_generate", spy)
    return SimpleNamespace(context=resolve_context(coder_model="scripted:x", **ctx)), seen


@pytest.mark.integration
def test_coder_in_kernel_format_wraps_the_reply_and_the_verifier_accepts_it(monkeypatch, probed):
    from pragma.nodes import coder

    script = {"coder": {"1": "Here it is.\n```cpp\n" + GATHER_CPP + "```\n"}}
    runtime, seen = _coder_runtime(monkeypatch, script, candidate_format="kernel")
    update = coder.coder({"problem": probed["gather_scale"], "iteration": 0}, runtime)
    cand = update["candidate"]
    assert cand["format"] == "kernel" and cand["kernel"].strip() == GATHERED.strip()
    assert "<signature>" in seen[0] and "int64_t shift" in seen[0] and "class ModelNew" not in seen[0]
    assert verify_candidate(probed["gather_scale"]["path"], cand["code"], _ctx())["status"] == "ok"


# What the embedded model wrote for log_softmax (emb1128b): collapse(2) over a row loop whose body
# starts with a declaration, so g++ refuses it ("not enough for loops to collapse").
COLLAPSED_CPP = GATHER_CPP.replace(
    "    for (int64_t r = 0;", "    #pragma omp parallel for collapse(2)\n    for (int64_t r = 0;"
)


@pytest.mark.integration
def test_a_one_thread_kernel_loses_its_collapse_clauses_and_compiles(monkeypatch, probed):
    from pragma.nodes import coder

    assert glue.without_collapse("#pragma omp parallel for simd collapse( TILE ) private(i)\n") == (
        "#pragma omp parallel for simd private(i)\n"
    )
    assert glue.without_collapse("int collapse(int n);\n") == "int collapse(int n);\n"  # pragma lines only
    script = {"coder": {"1": "```cpp\n" + COLLAPSED_CPP + "```\n"}}
    for threads in (1, 2):
        runtime, _ = _coder_runtime(monkeypatch, script, candidate_format="kernel", num_threads=threads)
        cand = coder.coder({"problem": probed["gather_scale"], "iteration": 0}, runtime)["candidate"]
        assert ("collapse(2)" in cand["kernel"]) == (threads == 2)
    # The kernel as written does not build; without the clause it does, and it is right.
    assert verify_candidate(probed["gather_scale"]["path"], cand["code"], _ctx())["status"] == "compile_error"
    one = coder.coder(
        {"problem": probed["gather_scale"], "iteration": 0},
        _coder_runtime(monkeypatch, script, candidate_format="kernel")[0],
    )
    assert verify_candidate(probed["gather_scale"]["path"], one["candidate"]["code"], _ctx())["status"] == "ok"


def test_coder_falls_back_to_module_and_says_why(monkeypatch, probed, caplog):
    from pragma.nodes import coder

    module = (Path(__file__).parent / "data" / "candidates" / "relu_fast.py").read_text()
    script = {"coder": {"1": f"```python\n{module}```\n"}}
    runtime, seen = _coder_runtime(monkeypatch, script, candidate_format="kernel")
    with caplog.at_level("WARNING", logger="pragma.coder"):
        update = coder.coder({"problem": probed["helper_init"], "iteration": 0}, runtime)
    cand = update["candidate"]
    assert cand["format"] == "module" and "constructor reads _make_layer" in cand["format_note"]
    assert "falls back to module" in caplog.text and "_make_layer" in update["log"][0]["note"]
    assert "class ModelNew" in seen[0] and "<signature>" not in seen[0]


def test_auto_format_is_kernel_for_the_local_model_only(probed):
    from pragma.nodes.coder import candidate_format

    assert candidate_format(resolve_context(coder_model="local"), probed["row_stats"])[0] == "kernel"
    assert candidate_format(resolve_context(coder_model="openai:big"), probed["row_stats"])[0] == "module"
    assert (
        candidate_format(resolve_context(coder_model="openai:big", candidate_format="kernel"), probed["row_stats"])[0]
        == "kernel"
    )


def test_unusable_kernel_reply_is_quoted_with_the_kernel_instruction(monkeypatch, probed):
    from pragma.nodes import coder, prompts

    runtime, _ = _coder_runtime(monkeypatch, {"coder": {"1": "Use torch.amax."}}, candidate_format="kernel")
    cand = coder.coder({"problem": probed["row_stats"], "iteration": 0}, runtime)["candidate"]
    shown = prompts.failed_code(cand)
    assert shown.startswith(prompts.NO_KERNEL) and "Use torch.amax." in shown


def test_probe_json_is_plain_data(probed):
    json.dumps(probed["gather_scale"])  # goes into checkpointed state
    assert EXAMPLES.is_dir()


@pytest.mark.integration
def test_full_kernel_format_run_repairs_by_rules_exports_and_remembers(monkeypatch, tmp_path):
    """The whole graph with kernel replies only: a compile error repaired from the fixed hint (no
    Conductor reply is scripted for it), a verified kernel crowned, best.py standalone, the memory grown."""
    import io

    from rich.console import Console

    from pragma.graph import runner
    from pragma.knowledge import kernels
    from pragma.nodes import llm
    from pragma.tools.problem import read_problem

    broken = GATHER_CPP.replace("const float* row = x + idx[r] * x_dim1;", "const float* row = x + idx[r] * x_dim1")
    # No conductor replies: repair_advice=rules asks no model, and the run ends after attempt 2.
    script = {"coder": {"1": f"```cpp\n{broken}```", "2": f"```cpp\n{GATHER_CPP}```"}, "conductor": {}}
    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(script))
    ctx = resolve_context(
        coder_model="scripted:coder",
        max_iterations=2,
        candidate_format="kernel",
        repair_advice="rules",
        profile_simulate="never",
        profile_hotspots=False,
    )
    buf = io.StringIO()
    code = runner.start_run(
        read_problem(PROBLEMS / "gather_scale.py"), ctx, tmp_path / "out", Console(file=buf, width=200)
    )
    printed = buf.getvalue()
    assert code == 0, printed
    assert "attempt 1 (initial): compile_error" in printed and "repair: - compile_error:" in printed
    assert "attempt 2 (repair): ok" in printed
    best = (tmp_path / "out" / "best.py").read_text()
    assert glue.GLUE_MARKER in best and "(float)alpha + (float)shift" in best
    row = next(r for r in kernels.listing() if r["name"] == "gather_scale")
    assert row["origin"] == "run" and row["format"] == "kernel" and row["code"].strip() == GATHERED.strip()
