"""Issue 19's red team: cheats that are correct on every check and attack the timing instead
(a content memo, predicted seeds, an interval-timer neighbour, a C-thread neighbour). Each runs
through the installed `pragma verify` with the static layer off (the runtime alone must hold),
next to its honest twin (the same kernel without the trick, a fixture's `twin:` field) in the
same test: the cheat is not `ok`, or its speedup is within 1.3x of the twin's.
"""

from pathlib import Path

import pytest
from conftest import ROOT
from test_verifier_redteam import ADVERSARIAL, _field, _problem, run_verify

pytestmark = [pytest.mark.integration, pytest.mark.timing]  # starts sandboxes/processes (tests/conftest.py)

TWIN_FACTOR = 1.3
QUIET = ["--set", "static_checks=false"]


def twin_cases() -> list:
    out = []
    for path in sorted(ADVERSARIAL.glob("*.py")):
        twin = _field(path.read_text(), "twin")
        if twin:
            out.append(pytest.param(path, ROOT / "tests" / "data" / twin, id=path.stem))
    return out


@pytest.mark.parametrize("cheat, twin", twin_cases())
def test_a_timing_cheat_gains_nothing_over_its_honest_twin(isolated_data_dir, cheat: Path, twin: Path):
    problem = _problem(_field(cheat.read_text(), "problem"))
    _, honest = run_verify(isolated_data_dir, problem, twin, QUIET)
    assert honest["status"] == "ok", honest["message"]
    _, result = run_verify(isolated_data_dir, problem, cheat, QUIET)
    if result["status"] == "ok":
        assert result["speedup"] <= TWIN_FACTOR * honest["speedup"], (
            f"{cheat.stem}: {result['speedup']:.2f}x against its twin's {honest['speedup']:.2f}x"
        )
    else:
        failed = [c["rule"] for c in result["checks"] if c["verdict"] == "fail"]
        assert result["status"] in ("rejected", "mismatch", "runtime_error"), (result["status"], failed)


def test_every_class_of_issue_19_has_a_twin_case():
    names = {p.values[0].stem for p in twin_cases()}
    assert {"content_memo_matmul", "seed_prediction_matmul", "interval_timer_neighbour", "c_thread_neighbour"} <= names


def test_every_timing_class_of_issue_33_has_a_case():
    """Issue 33: a memo recomputing only what changed and an output computed on first read, each
    beside its twin; the intermittent stale buffer is a `runtime-expect:` case (rejected)."""
    names = {p.values[0].stem for p in twin_cases()}
    assert {"changed_rows_matmul", "fault_deferred_relu"} <= names
    for name in ("intermittent_stale_relu", "intermittent_sparse_relu"):  # wrong on most elements / on one
        assert _field((ADVERSARIAL / f"{name}.py").read_text(), "runtime-expect") == "rejected audited_calls"
