"""The fast forms the Coder's prompt hands over for row, channel, reduction, loss, pooling and scan
operators (knowledge/formulas.py, knowledge/reductions.py), compiled and compared with torch.

Each case is a problem (a CPU-suite file, or a KernelBench level-1 operator at the overrides' CPU
size as eval/bench_fast_rows.py writes it): its <formulas> block exactly as the kernel prompt shows
it is pasted as the body of the signature, wrapped by tools/glue.py and built by tools/inside/cext.py (the
verifier's builder and flags), then run on the problem's own inputs and on negated, x1e3, x1e-3 and
mixed-sign versions of them. The reference is torch in float64; a float result may differ by
1e-4 * (|ref| + magnitude), the magnitude being the same operator on |inputs| for sums (what the
float rounding of a sum grows with), plus 1e-6 of the output's largest value (exp's tiny
underflows); integer results (argmax, argmin) must be equal.
"""

import copy
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import ROOT

from pragma.eval import bench_fast_rows as bench
from pragma.knowledge import formulas, reductions
from pragma.nodes import coder
from pragma.tools import glue

SUITE = ROOT / "eval" / "suites" / "cpu"
EXAMPLES = ROOT / "eval" / "suites" / "examples"

# case -> (which float inputs the stress variants change, whether the magnitude is the operator on |x|)
SUMS = {
    "sum_dim",
    "mean_hw",
    "cumsum",
    "reverse_cumsum",
    "kb_sum_dim1",
    "kb_mean_dim1",
    "kb_mse",
    "kb_huber",
    "kb_hinge",
    "smooth_l1",
    "cosine_sim",
    "kb_cosine_loss",
    "cross_entropy",
    "kb_cross_entropy",
    "logsumexp",
}
# Probability rows are never negated or scaled (tools/judging/stress.py): their variants are sharper rows.
PROBABILITIES = {"kb_kl_div"}


def _spec(source: str, model: Any, inputs: list[Any], init: list[Any], output: torch.Tensor) -> dict[str, Any]:
    """The kernel spec glue.kernel_spec derives from a probe (tools/inside/worker.py), from the values."""
    state = model.state_dict()
    problem = {
        "source": source,
        "inputs": [_describe(x) for x in inputs],
        "init_inputs": [_describe(x) for x in init],
        "outputs": {"items": [_describe(output)], "container": ""},
        "state_names": list(state),
        "state": [{"name": n, **_describe(t)} for n, t in state.items()],
    }
    return glue.kernel_spec(problem)


def _describe(x: Any) -> dict[str, Any]:
    if isinstance(x, torch.Tensor):
        return {"kind": "tensor", "dtype": str(x.dtype).removeprefix("torch."), "shape": list(x.shape)}
    return {"kind": type(x).__name__, "value": str(x)}


def _variants(label: str, inputs: list[Any], gen: torch.Generator) -> dict[str, list[Any]]:
    floats = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if label == "kb_hinge":
        floats = [0]  # the ±1 targets are discrete: never changed
    out = {"own": inputs}

    def each(fn):
        return [fn(x) if i in floats else x for i, x in enumerate(inputs)]

    if label in PROBABILITIES:
        out["sharper rows"] = each(lambda x: (torch.log(x) * 3).softmax(dim=-1))
        out["flatter rows"] = each(lambda x: (torch.log(x) * 0.3).softmax(dim=-1))
        return out
    out["negated"] = each(lambda x: -x)
    out["x1e3"] = each(lambda x: x * 1e3)
    out["x1e-3"] = each(lambda x: x * 1e-3)
    out["mixed signs"] = each(lambda x: x * (torch.randint(0, 2, x.shape, generator=gen) * 2 - 1).to(x.dtype))
    return out


def _check(label: str, got: torch.Tensor, ref: torch.Tensor, magnitude: torch.Tensor | None, variant: str) -> None:
    if not ref.is_floating_point():
        assert torch.equal(got, ref), f"{label} ({variant}): {int((got != ref).sum())} indices differ"
        return
    bound = 1e-4 * (ref.abs() + (magnitude.abs() if magnitude is not None else 0)) + 1e-6 * float(ref.abs().max())
    err = (got.double() - ref).abs()
    worst = int((err - bound).argmax()) if err.numel() else 0
    assert torch.isfinite(got).all() == torch.isfinite(ref).all(), f"{label} ({variant}): non-finite values differ"
    assert bool((err <= bound).all()), (
        f"{label} ({variant}): |got - ref| {float(err.flatten()[worst]):.3g} > bound {float(bound.flatten()[worst]):.3g}"
        f" at {worst} (ref {float(ref.flatten()[worst]):.6g})"
    )


CASES = sorted(bench.cases())


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("label", CASES)
def test_each_fast_form_in_the_problems_signature_matches_torch_in_float64(label, tmp_path, monkeypatch):
    from pragma.tools.inside import cext

    monkeypatch.setenv("PRAGMA_BUILD_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pragma_cext", cext)
    path = bench.cases()[label]
    source = Path(path).read_text()
    scope: dict[str, Any] = {"__name__": f"case_{label}"}
    exec(compile(source, str(path), "exec"), scope)  # noqa: S102 - the project's own problem text
    init = scope["get_init_inputs"]()
    torch.manual_seed(0)
    reference = scope["Model"](*init)
    torch.manual_seed(1)
    inputs = scope["get_inputs"]()
    with torch.no_grad():
        spec = _spec(source, reference, inputs, init, reference(*inputs))
        section = coder._formulas_section({"source": source}, spec)
        assert formulas.loop_bodied(source, spec), f"{label}: the prompt gives no whole body"
        block = section.split("```cpp\n", 1)[1].split("```", 1)[0]
        head = glue.prototype(spec).rstrip()
        cpp = glue.with_fast_forms(glue.with_standard_headers(f"{head} {{\n{block}}}\n"))
        glue_scope: dict[str, Any] = {}
        exec(compile(glue.module_source(spec, cpp), f"<{label}>", "exec"), glue_scope)  # noqa: S102
        torch.manual_seed(0)
        model = glue_scope["ModelNew"](*init)
        reference64 = copy.deepcopy(reference).double()
        gen = torch.Generator().manual_seed(7)
        for variant, xs in _variants(label, inputs, gen).items():
            if not all(torch.isfinite(y).all() for y in [reference(*xs)]):
                continue  # as the verifier: a variant counts where torch's own float output is finite
            ref = reference64(*[x.double() if x.is_floating_point() else x for x in xs])
            magnitude = None
            if label in SUMS:
                magnitude = reference64(*[x.double().abs() if x.is_floating_point() else x for x in xs])
            _check(label, model(*xs), ref, magnitude, variant)


def test_each_operator_is_found_where_the_problem_names_it_and_nowhere_else():
    # The suite's problems and KernelBench's spellings name their operators; get_inputs' softmax,
    # a norm's inner mean and an L1 norm's mean over |x| are not operators to write.
    for label, name in {
        "sum_dim": "sum",
        "max_dim": "max",
        "argmin_dim": "argmin",
        "mean_hw": "mean",
        "logsumexp": "logsumexp",
        "cross_entropy": "cross_entropy",
        "smooth_l1": "smooth_l1_loss",
        "cosine_sim": "cosine_similarity",
        "max_pool2d": "max_pool2d",
        "avg_pool1d": "avg_pool1d",
        "cumsum": "cumsum",
        "reverse_cumsum": "cumsum",
        "kb_mse": "mse_loss",
        "kb_kl_div": "kl_div",
        "kb_hinge": "hinge_loss",
        "kb_cumprod": "cumprod",
        "kb_max_pool1d": "max_pool1d",
        "kb_avg_pool2d": "avg_pool2d",
    }.items():
        assert reductions.find(Path(bench.cases()[label]).read_text()) == [name], label
    kl = Path(bench.cases()["kb_kl_div"]).read_text()
    assert "softmax" not in [n for n, _ in formulas.lookup(kl)]  # drawn in get_inputs, not computed
    assert reductions.find((SUITE / "layer_norm.py").read_text()) == []
    assert reductions.find("def forward(self, x):\n    return x.sum()") == []  # no dim: the whole tensor
    l1 = "def forward(self, x):\n    return x / torch.mean(torch.abs(x), dim=1, keepdim=True)"
    assert reductions.find(l1) == ["mean"]
    x = {"role": "input", "name": "x", "dtype": "float32", "shape": [4, 8]}
    same = {"args": [x, {"role": "output", "name": "out0", "dtype": "float32", "shape": [4, 8]}]}
    assert reductions.body("mean", l1, same) == ""  # the output is not the mean's: no body, no promise
    assert formulas.reduction_bodies(l1, same) == []


# Scans carry a dependency from one element to the next: their form interleaves rows in scalar
# code (no vector form g++ finds), so only they may build without packed vector instructions.
SCALAR_BY_DESIGN = {"cumsum", "reverse_cumsum", "kb_cumprod"}


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None or shutil.which("objdump") is None, reason="needs g++ and objdump")
@pytest.mark.skipif(not _has_avx2(), reason="the AVX2 build needs an x86 CPU with AVX2")
@pytest.mark.parametrize("label", CASES)
def test_each_fast_form_is_vector_code_on_an_avx2_build_too(label, tmp_path, monkeypatch):
    # The other machine kind: -mno-avx512f on top of the verifier's flags is what g++ makes of the
    # body on an AVX2 machine. A float ?: with arithmetic in an arm, std::max against a constant or
    # a bool turned into a float kept whole loops scalar there while AVX-512 masked them.
    from pragma.tools.inside import cext

    monkeypatch.setenv("PRAGMA_BUILD_DIR", str(tmp_path))
    path = bench.cases()[label]
    source = Path(path).read_text()
    scope: dict[str, Any] = {"__name__": f"case_{label}"}
    exec(compile(source, str(path), "exec"), scope)  # noqa: S102 - the project's own problem text
    init = scope["get_init_inputs"]()
    reference = scope["Model"](*init)
    inputs = scope["get_inputs"]()
    with torch.no_grad():
        spec = _spec(source, reference, inputs, init, reference(*inputs))
    block = coder._formulas_section({"source": source}, spec).split("```cpp\n", 1)[1].split("```", 1)[0]
    cpp = glue.with_fast_forms(glue.with_standard_headers(f"{glue.prototype(spec).rstrip()} {{\n{block}}}\n"))
    width = bench.vector_width(cext.build_cpp(cpp, extra_flags=("-mno-avx512f",), name=f"avx2_{label}"))
    if label in SCALAR_BY_DESIGN:
        return
    if not width.startswith("ymm"):
        # What this test guards is AVX2 losing what the AVX-512 build vectorizes. A strict-order window
        # sum (kb_avg_pool2d) is vector code only where g++'s tuning vectorizes across windows: with
        # -march=native on an AMD Zen 4 it was (ymm here, zmm natively); on an Intel Xeon with AVX-512
        # neither build was, which is that machine's cost model, not this body's fault.
        native = bench.vector_width(cext.build_cpp(cpp, name=f"native_{label}"))
        if not native.startswith(("zmm", "ymm")):
            pytest.skip(f"{label}: this machine's native build is not vector code either ({native})")
    assert width.startswith("ymm"), f"{label}: the AVX2 build's widest packed vectors are {width}"
