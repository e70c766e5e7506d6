"""`pragma verify` on real candidates: exit codes, JSON contract, and surviving bad kernels."""

import json
import subprocess
import sys
import time

import pytest
from conftest import CANDIDATES, EXAMPLES, pragma_env

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

REQUIRED = (
    "status",
    "message",
    "speedup",
    "runtime_ms",
    "ref_runtime_ms",
    "max_abs_diff",
    "checks",
    "speedup_ci",
    "samples_ms",
    "sandbox",
    "is_new_best",
)


def verify(data_dir, candidate, *extra, problem=EXAMPLES / "relu.py"):
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pragma.graph.cli", "verify", str(problem), str(candidate), "--json", *extra],
        env=pragma_env(data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, time.monotonic() - start


@pytest.mark.parametrize(
    "name, code, status",
    [
        ("relu_fast.py", 0, "ok"),
        ("relu_compile_error.py", 1, "compile_error"),
        ("relu_wrong.py", 1, "mismatch"),
        ("relu_segfault.py", 1, "runtime_error"),
    ],
)
def test_verify_exit_code_and_json(isolated_data_dir, name, code, status):
    proc, _ = verify(isolated_data_dir, CANDIDATES / name)
    assert proc.returncode == code, proc.stderr
    result = json.loads(proc.stdout)
    assert all(k in result for k in REQUIRED)
    assert result["status"] == status, result["message"]
    if status == "ok":
        assert result["speedup"] > 0 and result["runtime_ms"] > 0 and result["ref_runtime_ms"] > 0
        assert result["max_abs_diff"] <= 1e-4
        low, high = result["speedup_ci"]
        assert low <= result["speedup"] <= high and len(result["samples_ms"]["candidate"]) == 10
        assert all(c["verdict"] in ("pass", "warn", "skip") for c in result["checks"])
    if status == "mismatch":
        assert result["max_abs_diff"] > 0.01  # leaky slope 0.1 on randn inputs
    if status == "compile_error":
        assert "error" in result["message"].lower()
    if status == "runtime_error":
        assert "SIGSEGV" in result["message"]


def test_several_candidates_are_verified_in_one_invocation(isolated_data_dir):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pragma.graph.cli",
            "verify",
            str(EXAMPLES / "relu.py"),
            str(CANDIDATES / "relu_fast.py"),
            str(CANDIDATES / "relu_wrong.py"),
            "--json",
            "--set",
            "timed_calls=10",
        ],
        env=pragma_env(isolated_data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr  # one of them is wrong
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["candidate"].rsplit("/", 1)[-1], r["status"]) for r in lines] == [
        ("relu_fast.py", "ok"),
        ("relu_wrong.py", "mismatch"),
    ]
    assert all(all(k in r for k in REQUIRED) for r in lines)


def test_verify_kills_a_hanging_kernel(isolated_data_dir):
    proc, wall_s = verify(isolated_data_dir, CANDIDATES / "relu_hang.py", "--set", "run_timeout_s=5")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "timeout" and "5 s" in result["message"]
    assert wall_s < 60
    for name in ("pragma.tools.judging.judge", "pragma.tools.inside.worker"):  # the judge and its forked runners
        leftover = subprocess.run(["pgrep", "-af", name], capture_output=True, text=True)
        assert str(isolated_data_dir) not in leftover.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["/nonexistent/problem.py", str(CANDIDATES / "relu_fast.py")], "problem file not found"),
        ([str(EXAMPLES / "relu.py"), "/nonexistent/cand.py"], "candidate file not found"),
        # every file is read before the first verification starts
        (
            [str(EXAMPLES / "relu.py"), str(CANDIDATES / "relu_fast.py"), "/nonexistent/b.py"],
            "not found: /nonexistent/b",
        ),
        ([str(CANDIDATES / "relu_fast.py"), str(CANDIDATES / "relu_fast.py")], "missing Model"),
        ([str(EXAMPLES / "relu.py"), str(CANDIDATES / "relu_fast.py"), "--set", "bogus=1"], "--set expects"),
    ],
)
def test_verify_bad_invocation_is_one_line_exit_2(isolated_data_dir, args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "pragma.graph.cli", "verify", *args],
        env=pragma_env(isolated_data_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_reference_that_fails_is_a_problem_error(isolated_data_dir, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n"
        "        raise ValueError('bad reference')\n"
        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"
    )
    proc, _ = verify(isolated_data_dir, CANDIDATES / "relu_fast.py", problem=broken)
    assert proc.returncode == 2 and "bad reference" in proc.stderr and "Traceback" not in proc.stderr


def test_optimize_without_llm_names_the_settings(isolated_data_dir):
    proc = subprocess.run(
        [sys.executable, "-m", "pragma.graph.cli", "optimize", str(EXAMPLES / "relu.py")],
        env=pragma_env(isolated_data_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "PRAGMA_CODER_MODEL" in proc.stderr and "PRAGMA_LLM_BASE_URL" in proc.stderr
    assert "Traceback" not in proc.stderr
