"""The trust boundary is visible in the folders and checked both ways.

``tools/judging/`` decides verdicts and holds seeds and reference outputs; ``tools/inside/`` runs
beside candidate code (the runner, the profiling worker and everything they load). The sides are
read from the folders, not from a list kept by hand: a module moved or added is checked as what
its folder says it is.

- Judging never imports an inside module, directly or through any other library module (launch,
  wire, top-level helpers), except across the launch edges named in ``LAUNCH_EDGES``.
- Inside never imports a judging module, directly or through any other library module: the
  profiler's sandboxed worker must not carry the judge's comparison code (it once did, through
  ``region -> measure -> compare``).
- The wire (``tools/wire/``) reaches neither side.

Statements are read with ``ast`` (module level and inside functions alike), and two integration
tests import the judge and the worker in fresh interpreters and look at ``sys.modules``.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
PREFIX = "pragma.tools"

# The only edges from outside the inside folder into it that must exist, and why. Each is an
# import inside a function that runs in a child process after it forked and before it runs
# anything else, so the parent (the judge) never executes it.
LAUNCH_EDGES = {
    (
        "pragma.tools.launch.spawn",
        "pragma.tools.inside.runner",
    ): "a forked child becomes a runner: spawn.fork_runner imports the runner in the child only",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(TOOLS).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PREFIX, *parts))


MODULES = {_module_name(p): p for p in TOOLS.rglob("*.py")}


def _side(folder: str) -> set[str]:
    return {m for m in MODULES if m == f"{PREFIX}.{folder}" or m.startswith(f"{PREFIX}.{folder}.")}


JUDGING = _side("judging")
INSIDE = _side("inside")
WIRE = _side("wire")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every name an import statement in ``path`` names (``from a import b`` gives a and a.b)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def _resolve(name: str) -> str | None:
    """The library module an imported name lands in (the longest known prefix), or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return None


def _edges(module: str) -> dict[str, int]:
    """Library modules ``module`` imports (with a line that does), its own package's parents too
    (importing ``a.b.c`` runs ``a.b``'s ``__init__``)."""
    found: dict[str, int] = {}
    for line, name in _imports(MODULES[module]):
        target = _resolve(name)
        while target and target not in (PREFIX, module):
            if target in MODULES:
                found.setdefault(target, line)
            target = target.rsplit(".", 1)[0]
    return found


def _launch_edge(here: str, there: str) -> bool:
    """Whether ``here -> there`` is a named launch edge (or the package the edge's module is in,
    which the same import statement runs)."""
    return any(here == a and (there == b or b.startswith(there + ".")) for a, b in LAUNCH_EDGES)


def _reaches(start: str, forbidden: set[str]) -> list[str]:
    """Import paths from ``start`` into ``forbidden`` (one per forbidden module reached), not
    crossing ``LAUNCH_EDGES``."""
    paths: dict[str, list[str]] = {start: [start]}
    todo = [start]
    bad = []
    while todo:
        here = todo.pop()
        for there, line in _edges(here).items():
            if _launch_edge(here, there) or there in paths:
                continue
            paths[there] = [*paths[here], f"{there} (line {line} of {here.rsplit('.', 1)[-1]})"]
            if there in forbidden:
                bad.append(" -> ".join(paths[there]))
            else:
                todo.append(there)
    return bad


def test_the_folders_hold_both_sides():
    """The sets come from the folders; these are the modules the boundary is about."""
    for must in ("judge", "session", "compare", "stress", "acceptance"):
        assert f"{PREFIX}.judging.{must}" in JUDGING
    for must in ("runner", "guards", "worker", "region", "gpu_worker", "cext"):
        assert f"{PREFIX}.inside.{must}" in INSIDE
    assert all((TOOLS / "/".join(a.split(".")[2:])).with_suffix(".py").exists() for a, _ in LAUNCH_EDGES)


@pytest.mark.parametrize("module", sorted(JUDGING))
def test_judging_never_reaches_inside(module):
    bad = _reaches(module, INSIDE)
    assert not bad, bad


@pytest.mark.parametrize("module", sorted(INSIDE))
def test_inside_never_reaches_judging(module):
    bad = _reaches(module, JUDGING)
    assert not bad, bad


@pytest.mark.parametrize("module", sorted(WIRE))
def test_the_wire_reaches_neither_side(module):
    """What crosses the boundary is neutral: both sides import it, so it imports neither."""
    bad = _reaches(module, JUDGING | INSIDE)
    assert not bad, bad


def test_the_scan_sees_imports_in_functions_and_through_other_modules(tmp_path):
    """The scan itself: a function-level import is read, and a path through a third module is found."""
    fake = tmp_path / "fake_judge.py"
    fake.write_text("def f():\n    from pragma.tools.inside import runner\n    import pragma.tools.inside.cext as c\n")
    assert [_resolve(n) for _, n in _imports(fake)] == [
        f"{PREFIX}.inside",
        f"{PREFIX}.inside.runner",
        f"{PREFIX}.inside.cext",
    ]
    # spawn reaches the runner only through its named launch edge; without the exemption it would.
    assert not _reaches(f"{PREFIX}.launch.spawn", INSIDE)
    assert (f"{PREFIX}.launch.spawn", f"{PREFIX}.inside.runner") in LAUNCH_EDGES
    assert f"{PREFIX}.inside.runner" in _edges(f"{PREFIX}.launch.spawn")


@pytest.mark.integration
def test_the_judge_process_never_loads_an_inside_module():
    code = (
        "import sys, pragma.tools.judging.judge, pragma.tools.verify\n"
        "bad = [m for m in sys.modules if m.startswith('pragma.tools.inside')]\n"
        "print(bad)\nassert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.integration
def test_the_profiling_worker_never_loads_a_judging_module():
    code = (
        "import sys, pragma.tools.inside.worker, pragma.tools.inside.region, pragma.tools.inside.runner\n"
        "bad = [m for m in sys.modules if m.startswith('pragma.tools.judging')]\n"
        "print(bad)\nassert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
