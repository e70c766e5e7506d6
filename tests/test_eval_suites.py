"""Suites: loading (PRAGMA's and KernelBench-style trees), categories, shape overrides, and the
CPU suite's own guarantees (size, categories, odd sizes, reference time, no degenerate outputs)."""

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

from pragma.eval.suite_check import check_problem
from pragma.eval.suites import (
    CATEGORIES,
    SuiteError,
    category_from_name,
    load_suite,
    module_globals,
)

CPU_SUITE = ROOT / "eval" / "suites" / "cpu"

RELU = '''"""A KernelBench-style problem."""
import torch
from torch import nn

batch_size = 16
dim = 16384


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def kernelbench_tree(tmp_path):
    """A miniature KernelBench checkout: two levels, plus files that are not problems."""
    root = tmp_path / "KernelBench"
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    (root / "scripts").mkdir()
    (root / "level1" / "19_ReLU.py").write_text(RELU)
    (root / "level1" / "47_Sum_reduction_over_a_dimension.py").write_text(RELU)
    (root / "level2" / "1_Conv2D_ReLU_BiasAdd.py").write_text(RELU)
    (root / "scripts" / "run_and_check.py").write_text("print('not a problem')\n")
    (root / "level1" / "__init__.py").write_text("")
    return root


def test_cpu_suite_covers_six_categories_with_odd_sizes():
    problems = load_suite(CPU_SUITE)
    assert len(problems) >= 30
    counts = Counter(p.category for p in problems)
    assert set(counts) == set(CATEGORIES) and min(counts.values()) >= 5, counts
    odd = [
        p.name
        for p in problems
        if any(
            isinstance(getattr(v, "value", None), int) and v.value % 2 == 1 and v.value > 1
            for v in module_globals(Path(p.path).read_text()).values()
        )
    ]
    assert len(odd) >= len(problems) // 2, "most problems should have an odd size somewhere"


def test_cpu_suite_reference_timings_were_recorded_in_range():
    """The recorded figures (python -m pragma.eval.suite_check eval/suites/cpu --time --json ...)
    cover every problem, and each reference call took 2-50 ms with one thread when measured.
    The fastest call is checked: on a shared 2-core machine the median carries the others' load
    (the file records the load average next to the figures)."""
    figures = json.loads((CPU_SUITE / "timings.json").read_text())
    names = {p.name for p in load_suite(CPU_SUITE)}
    assert names <= set(figures)
    for name in names:
        assert 2.0 <= figures[name]["ref_min_ms_1t"] <= 50.0, (name, figures[name])


def test_no_cpu_suite_problem_is_passed_by_a_constant_output():
    """Proof for every problem: an all-zeros output (or the output's mean everywhere) fails
    atol=rtol=1e-4 on the verifier's first seeded inputs, and no fixed output passes the trials
    and the stress variants together (the verifier's tolerance_discriminates rule)."""
    failures = {}
    for p in load_suite(CPU_SUITE):
        res = check_problem(p.path)
        if res["degenerate"] or not res["decidable"] or res["needs_stress"]:
            failures[p.name] = (res["degenerate"], res["why"])
        # Every problem with a float input gets at least one variant (embedding_lookup has only indices).
        assert res["stress_used"] or res["structures"] == ["integer"], (p.name, res["stress_skipped"])
    assert not failures


def test_categories_from_suite_json_docstring_and_file_names(kernelbench_tree):
    examples = {p.name: p.category for p in load_suite(EXAMPLES)}
    assert examples == {
        "matmul": "matmul",
        "relu": "activation",
        "softmax": "normalization",
        "sum_reduction": "pooling/reduction",
    }  # suite.json says "reduction": an alias
    tree = {p.name: p.category for p in load_suite(kernelbench_tree)}
    assert tree == {
        "level1/19_ReLU": "activation",
        "level1/47_Sum_reduction_over_a_dimension": "pooling/reduction",
        "level2/1_Conv2D_ReLU_BiasAdd": "convolution",
    }  # scripts and __init__ skipped
    assert category_from_name("1_Square_matrix_multiplication_") == "matmul"
    assert category_from_name("23_Softmax") == "normalization"
    assert category_from_name("95_CrossEntropyLoss") == "others"


def test_shape_overrides_materialize_a_copy_and_leave_the_original(kernelbench_tree, tmp_path, isolated_data_dir):
    overrides = tmp_path / "sizes.json"
    overrides.write_text(
        json.dumps(
            {"defaults": {"batch_size": 4, "not_defined_anywhere": 1}, "problems": {"level1/19_*": {"dim": 1023}}}
        )
    )
    problems = {p.name: p for p in load_suite(kernelbench_tree, overrides)}
    relu = problems["level1/19_ReLU"]
    assert relu.overrides == {"batch_size": 4, "dim": 1023}
    assert Path(relu.path).is_relative_to(isolated_data_dir) and relu.source_path.endswith("level1/19_ReLU.py")
    sizes = {k: v.value for k, v in module_globals(Path(relu.path).read_text()).items()}
    assert sizes == {"batch_size": 4, "dim": 1023}
    assert "dim = 16384" in (kernelbench_tree / "level1" / "19_ReLU.py").read_text()
    # The overridden problem really runs with the new sizes.
    assert check_problem(relu.path)["output_shapes"] == [[4, 1023]]
    assert problems["level2/1_Conv2D_ReLU_BiasAdd"].overrides == {"batch_size": 4}
    assert problems["level2/1_Conv2D_ReLU_BiasAdd"].sha256 != relu.sha256


def test_two_loaders_materialize_one_problem_at_once(kernelbench_tree, tmp_path, isolated_data_dir):
    """Two evaluation runs started together load the same suite with the same overrides: both
    materialize the same copies at once, and neither may fail on the other's temporary file (found
    when two ablation runs started in the same second)."""
    from concurrent.futures import ThreadPoolExecutor

    overrides = tmp_path / "sizes.json"
    overrides.write_text(json.dumps({"defaults": {"batch_size": 4}, "problems": {}}))
    for attempt in range(6):  # a fresh copy each time: the race is only on first materialization
        overrides.write_text(json.dumps({"defaults": {"batch_size": 4 + attempt}, "problems": {}}))
        with ThreadPoolExecutor(8) as pool:
            loaded = list(pool.map(lambda _: load_suite(kernelbench_tree, overrides), range(8)))
        paths = {tuple(p.path for p in problems) for problems in loaded}
        assert len(paths) == 1 and all(Path(p).is_file() for p in next(iter(paths)))
    assert not list(isolated_data_dir.rglob("*.tmp"))


def test_toml_overrides_and_filters(kernelbench_tree, tmp_path):
    overrides = tmp_path / "sizes.toml"
    overrides.write_text('[problems."level2/*"]\nbatch_size = 2\n')
    [only] = load_suite(kernelbench_tree, overrides, patterns=["level2/*"])
    assert only.overrides == {"batch_size": 2}


@pytest.mark.parametrize(
    "content, message",
    [
        ({"problems": {"level1/19_*": {"dimm": 3}}}, "has no module-level dimm"),
        ({"problems": {"level9/*": {"dim": 3}}}, "match no problem"),
        ({"sizes": {}}, "expected"),
    ],
)
def test_bad_overrides_fail_with_one_line(kernelbench_tree, tmp_path, content, message):
    overrides = tmp_path / "bad.json"
    overrides.write_text(json.dumps(content))
    with pytest.raises(SuiteError, match=message):
        load_suite(kernelbench_tree, overrides)


def test_a_directory_without_problems_is_an_error(tmp_path):
    (tmp_path / "x.py").write_text("print(1)\n")
    with pytest.raises(SuiteError, match="no KernelBench-format problems"):
        load_suite(tmp_path)
    with pytest.raises(SuiteError, match="not found"):
        load_suite(tmp_path / "missing")
