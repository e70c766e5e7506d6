"""Issue 17.3: one meaning of "best". Progress lines, report.md and best.py show the verifier's
accepted best; a faster measurement the verifier did not accept is shown as such."""

from __future__ import annotations

import io

from rich.console import Console

from pragma.graph.context import Context
from pragma.graph.report import write_outputs
from pragma.graph.runner import _progress

CODE_1 = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
CODE_2 = CODE_1.replace("torch.relu(x)", "x.clamp_min(0)")


def verification(speedup: float, accepted: bool, acceptance: str) -> dict:
    return {
        "status": "ok",
        "speedup": speedup,
        "runtime_ms": 1.0 / speedup,
        "ref_runtime_ms": 1.0,
        "is_new_best": accepted,
        "acceptance": acceptance,
        "message": "",
    }


def attempt(i: int, speedup: float, accepted: bool, code: str) -> dict:
    return {
        "iteration": i,
        "origin": "refine",
        "status": "ok",
        "speedup": speedup,
        "runtime_ms": 1.0 / speedup,
        "ref_runtime_ms": 1.0,
        "max_abs_diff": 0.0,
        "message": "",
        "is_new_best": accepted,
        "code": code,
    }


def test_progress_shows_the_accepted_best_and_a_faster_unaccepted_measurement_as_such():
    buf = io.StringIO()
    console = Console(file=buf, width=400, markup=False, highlight=False)
    best: dict = {}
    _progress(
        console,
        "verifier",
        {
            "verification": verification(0.977, True, "accepted: first correct candidate"),
            "attempts": [attempt(1, 0.977, True, CODE_1)],
        },
        best,
    )
    _progress(
        console,
        "profiler",
        {"profile": {"bottleneck": "memory-bound"}, "best": {"iteration": 1, "speedup": 0.977}},
        best,
    )
    _progress(
        console,
        "verifier",
        {
            "verification": verification(
                1.108, False, "not accepted: 95% CI of the speedup over the best [0.950, 1.210] includes or is below 1"
            ),
            "attempts": [attempt(2, 1.108, False, CODE_2)],
        },
        best,
    )
    _progress(console, "profiler", {"profile": {"bottleneck": "memory-bound"}}, best)
    lines = buf.getvalue().splitlines()
    assert lines[0].endswith("the new best; best 0.977x (attempt 1)")
    assert "speedup 1.108x" in lines[2]
    assert "not significantly faster than the best; best 0.977x (attempt 1)" in lines[2]
    assert "best 1.108" not in buf.getvalue() and "best so far" not in buf.getvalue()


def test_report_and_best_py_hold_the_accepted_best(tmp_path):
    state = {
        "problem": {"path": "relu.py", "name": "relu"},
        "iteration": 2,
        "usage": {},
        "log": [],
        "attempts": [attempt(1, 0.977, True, CODE_1), attempt(2, 1.108, False, CODE_2)],
        "best": {
            "iteration": 1,
            "code": CODE_1,
            "speedup": 0.977,
            "runtime_ms": 1.02,
            "ref_runtime_ms": 1.0,
            "profile": {},
        },
    }
    written = write_outputs(state, Context(max_iterations=2), "relu-t", tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "## Best: attempt 1, 0.977x over PyTorch" in report
    assert "- attempt 2 measured 1.108x, not significantly faster than the best" in report
    row = next(line for line in report.splitlines() if line.startswith("| 2 |"))
    assert "not significantly faster than the best" in row
    assert "the best (accepted by the verifier)" in next(
        line for line in report.splitlines() if line.startswith("| 1 |")
    )
    best_py = (tmp_path / "best.py").read_text()
    assert "torch.relu(x)" in best_py and "clamp_min" not in best_py
    assert tmp_path / "best.py" in written
