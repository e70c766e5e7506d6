"""KernelBench's own convention (load_inline) is accepted, cached and profiled (slow: ~60 s compile)."""

import pytest
from conftest import CANDIDATES, EXAMPLES

from pragma.graph.context import resolve_context
from pragma.tools.profilers.cpu import profile_candidate
from pragma.tools.verify import verify_candidate


@pytest.mark.integration
def test_load_inline_candidate_verifies_and_reuses_its_build(isolated_data_dir):
    ctx = resolve_context()
    code = (CANDIDATES / "relu_load_inline.py").read_text()
    first = verify_candidate(str(EXAMPLES / "relu.py"), code, ctx)
    assert first["status"] == "ok", first["message"] + first["log_tail"]
    [build] = first["builds"]
    assert build["kind"] == "load_inline" and build["so_path"].startswith(str(isolated_data_dir))
    profile = profile_candidate(str(EXAMPLES / "relu.py"), code, ctx)
    assert profile["status"] == "ok"
    assert profile["vectorization"]["vectorized_loops"] >= 1  # report filtered to main.cpp, not torch headers
    assert profile["instruction_mix"]["packed_fp"] > 0
