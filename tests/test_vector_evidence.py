"""Issue 34: a kernel written with vector intrinsics is vectorized, whatever gcc's report says.

gcc's -fopt-info-vec report covers its own auto-vectorization only: a softmax whose loops are
AVX2 intrinsics (tails through masked loads, so no scalar remainder loop is left for gcc) reads
"0 loops vectorized, 4 not", and the profile used to label it ``not-vectorized``. The label must
follow what the built binary's hot loop runs (objdump), the way ``tools/profilers/cpu.py`` builds
the static evidence. Real g++ through tools/inside/cext.py, real objdump.
"""

import shutil
from pathlib import Path

import pytest

from pragma.tools.inside import cext
from pragma.tools.profilers import bottleneck, cpu, instruction_mix, vectorization

pytestmark = pytest.mark.integration
CPP = Path(__file__).parent / "data" / "cpp"
# A compute-side kernel far below its roof: the case where scalar code is a plausible diagnosis.
LOW_COMPUTE_ROOF = {
    "status": "ok",
    "bound_by": "compute",
    "arithmetic_intensity": 2.0,
    "ridge_flop_per_byte": 1.0,
    "roofline_pct": 4.0,
    "achieved_gflops": 2.0,
    "peak_gflops": 50.0,
}


def _cpu_has(flag: str) -> bool:
    text = Path("/proc/cpuinfo").read_text()
    return any(flag in line.split() for line in text.splitlines() if line.startswith("flags"))


def _static_evidence(tmp_path, monkeypatch, name: str, flags: tuple[str, ...] = ()) -> tuple[dict, dict, list[str]]:
    if shutil.which("objdump") is None or shutil.which(cext.COMPILER) is None:
        pytest.skip("g++ and objdump (binutils) are needed")
    monkeypatch.setenv("PRAGMA_BUILD_DIR", str(tmp_path))
    cext.build_cpp((CPP / name).read_text(), flags, name=name.split(".")[0])
    build = cext.BUILDS[-1]
    sources, metrics, notes, tools = [], {}, [], {}
    vect, mix, _ = cpu._static(build, sources, metrics, notes, tools, ["softmax_rows"])
    assert vect is not None and mix is not None, (notes, tools)
    return vect, mix, [label for label, _ in bottleneck.signals_cpu(metrics, LOW_COMPUTE_ROOF, vect, mix)]


def test_intrinsics_softmax_is_not_called_not_vectorized(tmp_path, monkeypatch):
    if not _cpu_has("avx2"):
        pytest.skip("this CPU has no AVX2: the intrinsics softmax cannot be built for it")
    vect, mix, labels = _static_evidence(tmp_path, monkeypatch, "softmax_avx2_masked.cpp")
    # The situation of the issue: gcc auto-vectorized nothing ...
    assert vect["vectorized_loops"] == 0 and vect["missed_loops"] >= 1
    # ... while the hot loop runs packed 256-bit FP.
    hot = mix["hot_loop"]
    assert hot["packed_fp"] > hot["scalar_fp"] and hot["widest_vector_bits"] >= 256
    assert instruction_mix.packed_dominates(mix)
    assert "not-vectorized" not in labels and labels[0] == "compute-bound"
    text = vectorization.render(vect)
    assert "hot loop already runs packed vector instructions" in text
    assert "hot loop (" in instruction_mix.render(mix)


def test_scalar_softmax_is_still_not_vectorized(tmp_path, monkeypatch):
    # Built without gcc's vectorizer: every FP instruction of the binary is scalar.
    vect, mix, labels = _static_evidence(tmp_path, monkeypatch, "softmax_scalar.cpp", ("-fno-tree-vectorize",))
    assert mix["packed_fp"] == 0 and mix["scalar_fp"] > 0 and not instruction_mix.packed_dominates(mix)
    assert labels[0] == "not-vectorized", labels
    assert "note" not in vect
