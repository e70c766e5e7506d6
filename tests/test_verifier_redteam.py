"""Red-team suite: `pragma verify` (the real CLI, real builds, real sandbox) on every cheating and
honest candidate. Expectations live in each fixture's docstring (see tests/data/adversarial/README.md).

Speed is irrelevant here, so the runs use few timed calls and a short warm-up. Most verdicts do not
depend on the machine's load either, and these tests run in `make test`'s parallel pass; a fixture
whose verdict rests on when its threads get to run (``timing:`` in its docstring says why) is marked
`timing` and runs in the pass that has the machine alone.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CANDIDATES, EXAMPLES, pragma_env

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)

ADVERSARIAL = Path(__file__).parent / "data" / "adversarial"
QUICK = ["--set", "timed_calls=10", "--set", "warmup_calls=2", "--set", "warmup_s=0.05"]
# The installed console script is exactly what users run; fall back to the module in a bare checkout.
_SCRIPT = Path(sys.executable).with_name("pragma")
PRAGMA = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "pragma.graph.cli"]
ESCAPE_MARKER = Path("/tmp/pragma-redteam-escape.txt")  # what write_outside.py tries to create
FORK_MARKER = "sleep 4242.4242"  # what fork_process.py leaves behind if the sandbox lets it


def _field(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}: (.+)$", text, re.M)
    return m.group(1).strip() if m else None


def _problem(name: str) -> Path:
    return ADVERSARIAL / name if "/" in name else EXAMPLES / f"{name}.py"


def cases(layer: str) -> list:
    """(fixture path, problem, expected status, expected rule or None, extra --set values)."""
    key = "expect" if layer == "static" else "runtime-expect"
    out = []
    for path in sorted(ADVERSARIAL.glob("*.py")):
        text = path.read_text()
        expect = _field(text, key)
        if expect is None:
            continue
        status, _, rule = expect.partition(" ")
        settings = (_field(text, "settings") or "").split()
        marks = [pytest.mark.timing] if _field(text, "timing") else []
        out.append(
            pytest.param(
                path, _problem(_field(text, "problem")), status, rule or None, settings, id=path.stem, marks=marks
            )
        )
    if layer == "static":  # the spine's honest kernels must pass too
        for path in sorted(CANDIDATES.glob("*_fast.py")):
            out.append(
                pytest.param(
                    path, EXAMPLES / f"{path.stem.removesuffix('_fast')}.py", "ok", None, [], id=f"honest-{path.stem}"
                )
            )
    return out


SECRET_MARKER = "sk-pragma-redteam-secret-5150"


def run_verify(data_dir: Path, problem: Path, candidate: Path, extra: list[str]) -> tuple[int, dict]:
    # A fixture's `secret:` names a variable the launcher holds (as a real run holds its API key):
    # its value must come back in no output, log or result.
    secret = _field(candidate.read_text(), "secret")
    env = pragma_env(data_dir, **({secret: SECRET_MARKER} if secret else {}))
    proc = subprocess.run(
        [*PRAGMA, "verify", str(problem), str(candidate), "--json", *QUICK, *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.stdout.strip(), proc.stderr
    if secret:
        assert SECRET_MARKER not in proc.stdout + proc.stderr, f"{secret} leaked to the candidate"
        leaked = [str(f) for f in data_dir.rglob("*") if f.is_file() and SECRET_MARKER.encode() in f.read_bytes()]
        assert not leaked, f"{secret} found in {leaked}"
    return proc.returncode, json.loads(proc.stdout)


# Run alone, each in its own `pragma verify`: their side effects (a file outside the sandbox, a
# process left behind, a secret in the launcher's environment) are checked right after their run.
ALONE = ("write_outside", "fork_process")


def _alone(candidate: Path) -> bool:
    return candidate.stem in ALONE or _field(candidate.read_text(), "secret") is not None


@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    """Verdicts of the fixtures that can share a process: one `pragma verify PROBLEM CAND...` per
    (layer, problem, settings, timing mark) group, each group run on first use, so a pass that
    deselects a group's tests never runs it. Each fixture is still its own test below.

    Why: a `pragma verify` process pays an interpreter start, the torch import and the sandbox's
    pre-started judge (about 2-3 s) before its first verification; the ~130 red-team runs paid it
    each. Several candidates in one invocation is a feature users have too (tests/test_verify_cli.py).
    """
    results: dict[tuple[str, Path], dict] = {}
    data_dirs: dict[str, Path] = {}  # one per layer: its groups share the machine's measured bandwidth
    layer_groups: dict[str, dict[tuple[Path, tuple[str, ...], bool], list[Path]]] = {}

    def groups_of(layer: str) -> dict[tuple[Path, tuple[str, ...], bool], list[Path]]:
        if layer not in layer_groups:
            groups = layer_groups[layer] = {}
            for param in cases(layer):
                path, problem, _, _, settings = param.values
                if not _alone(path):
                    extra = ("--set", "static_checks=false") if layer == "runtime" else ()
                    extra += tuple(a for s in settings for a in ("--set", s))
                    groups.setdefault((problem, extra, bool(param.marks)), []).append(path)
            data_dirs[layer] = tmp_path_factory.mktemp(f"redteam-{layer}")
        return layer_groups[layer]

    def get(layer: str, candidate: Path) -> dict:
        if (layer, candidate) not in results:
            for (problem, extra, _), paths in groups_of(layer).items():
                if candidate not in paths:
                    continue
                data_dir = data_dirs[layer]
                proc = subprocess.run(
                    [*PRAGMA, "verify", str(problem), *map(str, paths), "--json", *QUICK, *extra],
                    env=pragma_env(data_dir),
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
                assert len(lines) == len(paths), (proc.stdout[-2000:], proc.stderr[-2000:])
                by_path = {r.pop("candidate"): r for r in lines} if len(paths) > 1 else {str(paths[0]): lines[0]}
                # The exit code speaks for the whole invocation: 0 only when every candidate was ok.
                assert proc.returncode == (0 if all(r["status"] == "ok" for r in by_path.values()) else 1)
                for path in paths:
                    results[(layer, path)] = by_path[str(path)]
        return results[(layer, candidate)]

    return get


def verdict(request, layer: str, data_dir: Path, problem: Path, candidate: Path, extra: list[str]):
    """(exit code or None when batched, result) for one fixture."""
    if _alone(candidate):
        return run_verify(data_dir, problem, candidate, extra)
    return None, request.getfixturevalue("batched")(layer, candidate)


def assert_verdict(code: int | None, result: dict, status: str, rule: str | None) -> None:
    failed = [c["rule"] for c in result["checks"] if c["verdict"] == "fail"]
    assert result["status"] == status, (result["message"], failed, result["log_tail"][-1500:])
    if code is not None:
        assert code == (0 if status == "ok" else 1)
    if rule:
        assert rule in failed, (result["message"], failed)
    if status == "rejected":
        assert result["message"].startswith(f"rule {failed[0]}:")
    if status == "ok":
        assert not failed and result["speedup"] > 0 and result["holdout_ok"]
        low, high = result["speedup_ci"]
        assert 0 < low <= result["speedup"] <= high
    # Total result: the contract's fields are present and every number is finite JSON.
    for key in ("speedup_ci", "samples_ms", "sandbox", "checks", "is_new_best"):
        assert key in result
    # (allow_nan=False raises on a non-finite number; a message may still say "NaN/Inf" in words).
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize("candidate, problem, status, rule, settings", cases("static"))
def test_redteam_default_layers(request, isolated_data_dir, candidate, problem, status, rule, settings):
    ESCAPE_MARKER.unlink(missing_ok=True)
    extra = [a for s in settings for a in ("--set", s)]
    code, result = verdict(request, "static", isolated_data_dir, problem, candidate, extra)
    assert_verdict(code, result, status, rule)
    assert not ESCAPE_MARKER.exists()
    assert_described(candidate, result)


def assert_described(candidate: Path, result: dict) -> None:
    """The optional ``message:`` (a substring of the verdict) and ``stress-used:`` (variants that
    must have been compared) fields of a fixture."""
    text = candidate.read_text()
    if message := _field(text, "message"):
        assert message in result["message"], result["message"]
    for name in (_field(text, "stress-used") or "").split(","):
        if name.strip():
            assert name.strip() in result["stress"]["used"], result["stress"]


@pytest.mark.parametrize("candidate, problem, status, rule, settings", cases("runtime"))
def test_redteam_runtime_layer_alone(request, isolated_data_dir, candidate, problem, status, rule, settings):
    """With the static rules off, the sandbox and the runtime rules must still stop each cheat."""
    ESCAPE_MARKER.unlink(missing_ok=True)
    extra = ["--set", "static_checks=false", *[a for s in settings for a in ("--set", s)]]
    code, result = verdict(request, "runtime", isolated_data_dir, problem, candidate, extra)
    if candidate.stem == "write_outside" and result["sandbox"].get("filesystem", "").startswith("none"):
        pytest.skip(f"no filesystem confinement here: {result['sandbox']['filesystem']}")
    assert_verdict(code, result, status, rule)
    assert not ESCAPE_MARKER.exists(), "the candidate wrote outside its directory"
    if candidate.stem == "write_outside":
        assert "Permission denied" in result["message"]
    leftover = subprocess.run(["pgrep", "-f", FORK_MARKER], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", f"processes left behind: {leftover.stdout}"


def test_suite_covers_every_hack_named_in_the_issue():
    names = {p.stem for p in ADVERSARIAL.glob("*.py") if not p.stem.startswith("honest")}
    assert len(names) >= 12
    for hack in (
        "reuse_freed_output",
        "mutate_inputs",
        "zeros_tiny_output",
        "cache_across_calls",
        "background_thread",
        "patch_timer",
        "patch_torch",
        "half_precision",
        "torch_op",
        "try_fallback",
        "subclass_model",
        "lazy_tensor",
        "fork_process",
        "write_outside",
        "fill_memory",
        # issue 11: the verifier's own code, watched-only behaviour, memos, secrets, libc
        "patch_verifier_modules",
        "switch_after_first_call",
        "memo_pointer_samples",
        "read_secrets",
        "libc_escape",
        # issue 12: right only on the sampled range; a constant scalar
        "range_copy_relu",
        "range_gelu_polynomial",
        "range_clamped_table",
        "constant_scalar",
        # the timed rounds' shared input region: sealed, so no implementation can poison another's inputs
        "poison_shared_inputs",
    ):
        assert hack in names
