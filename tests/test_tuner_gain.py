"""eval/tuner_gain.py: tuned over untuned, head to head from the gate's session (issue 32)."""

from __future__ import annotations

import pytest

from pragma.eval import tuner_gain


def _child(ratio: float, accepted: bool, status: str = "ok") -> dict:
    return {"origin": "tune", "status": status, "is_new_best": accepted, "speedup_vs_best": ratio}


def test_head_to_head_multiplies_the_accepted_childrens_ratios_only():
    assert tuner_gain.head_to_head([]) == 1.0  # the sweep kept the kernel: the best is unchanged
    assert tuner_gain.head_to_head([_child(1.4, False)]) == 1.0  # refused by the gate: not the best
    assert tuner_gain.head_to_head([_child(3.0, True), _child(0.0, False, "mismatch")]) == 3.0
    # a second sweep (of a later candidate) tuned from the first winner: the ratios chain
    assert tuner_gain.head_to_head([_child(2.0, True), _child(1.5, True)]) == pytest.approx(3.0)


def test_the_table_shows_both_ratios_and_the_drift_beside_them():
    result = {
        "tuned_run": "t",
        "untuned_run": "u",
        "mode": "pragma",
        "problems": [
            {
                "problem": "conv1d",
                "tuned_best": 1.07,
                "head_to_head": 3.6,
                "params": "OB=8, PV=32",
                "tune_s": 48.0,
                "tune_variants": 7,
                "untuned_best": 0.29,
                "across_runs": 1.07 / 0.29,
            },
            {
                "problem": "relu",
                "tuned_best": 0.97,
                "head_to_head": 1.0,
                "params": "",
                "tune_s": 0.0,
                "tune_variants": 0,
                "untuned_best": 1.0,
                "across_runs": 0.97,
            },
        ],
        "geomean_head_to_head": 1.897,
        "geomean_across_runs": 1.87,
        "tuned_problems": 1,
        "tune_s_mean": 24.0,
        "tune_s_max": 48.0,
        "llm_calls_tuned": 4.0,
        "llm_calls_untuned": 4.0,
    }
    md = tuner_gain.render_markdown(result)
    assert "geomean **1.897x** over 2 problems, 1 tuned" in md
    assert "LLM calls: 4 with the tuner, 4 without" in md
    assert "| conv1d | 1.070x | 3.600x | OB=8, PV=32 | 48.0 (7) | 0.290x | 3.690x |" in md
    assert "| relu | 0.970x | 1.000x | - | 0.0 (0) | 1.000x | 0.970x |" in md


def test_an_unknown_run_is_one_line_and_exit_2(isolated_data_dir, capsys):
    assert tuner_gain.main(["no-such-run"]) == 2
    err = capsys.readouterr().err
    assert "error: no evaluation run 'no-such-run'" in err and "Traceback" not in err
