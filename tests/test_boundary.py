"""The trust boundary is visible in the code: judging modules never import a module that runs
candidate code (``pragma.tools.inside``, the cext loader, the profiling worker).

Two checks: an AST scan of every import statement in the judging modules (module level and inside
functions), and the real import closure of the judge in a fresh interpreter.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"

# Judging: decide verdicts, hold seeds and reference outputs.
JUDGING = (
    "judge.py",
    "compare.py",
    "stress.py",
    "freshen.py",
    "peek.py",
    "stats.py",
    "physical.py",
    "verify.py",
    "anticheat.py",
)
# Neutral plumbing both sides import (no verdicts, no candidate code).
NEUTRAL = ("protocol.py", "shm.py")
# Run candidate code (or live in a process that does).
INSIDE_PREFIXES = (
    "pragma.tools.inside",
    "pragma.tools.cext",
    "pragma.tools.worker",
    "pragma.tools.region",
    "pragma.tools.gpu_worker",
    "pragma.tools.guards",
)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module an import statement in ``path`` names (``from a import b`` gives a and a.b)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def _inside(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in INSIDE_PREFIXES)


@pytest.mark.parametrize("module", JUDGING + NEUTRAL)
def test_judging_modules_import_nothing_from_inside(module):
    bad = [f"{module}:{line} imports {name}" for line, name in _imports(TOOLS / module) if _inside(name)]
    assert not bad, bad


def test_the_scan_sees_an_inside_import(tmp_path):
    """The scan itself: a judging module with a function-level import of the runner is caught."""
    fake = tmp_path / "fake_judge.py"
    fake.write_text("def f():\n    from pragma.tools.inside import runner\n    import pragma.tools.cext as c\n")
    assert [name for _, name in _imports(fake) if _inside(name)] == [
        "pragma.tools.inside",
        "pragma.tools.inside.runner",
        "pragma.tools.cext",
    ]


def test_every_module_in_the_inside_package_is_marked_inside():
    for path in (TOOLS / "inside").glob("*.py"):
        assert _inside(f"pragma.tools.inside.{path.stem}")


@pytest.mark.integration
def test_the_judge_process_never_loads_an_inside_module():
    code = (
        "import sys, pragma.tools.judge, pragma.tools.verify\n"
        f"bad = [m for m in sys.modules if m.startswith({INSIDE_PREFIXES!r})]\n"
        "print(bad)\nassert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
