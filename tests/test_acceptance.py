"""The acceptance rule (tools/judging/acceptance.py) is the one place "is this the new best?" is decided."""

import ast
from pathlib import Path

from pragma.tools.judging import acceptance

ROOT = Path(__file__).resolve().parent.parent


def test_the_bar_is_strict_and_confirmation_covers_only_a_thin_clearance():
    bar_x = acceptance.bar(0.08)
    assert bar_x == 1.08
    assert not acceptance.clears(1.08, bar_x)  # equal to the bar is not faster
    assert acceptance.clears(1.0801, bar_x)
    assert acceptance.needs_confirmation(1.1, bar_x)
    assert not acceptance.needs_confirmation(1.08 * 1.25, bar_x)  # clears by more than any bias measured
    assert not acceptance.decided([1.0, 1.2], bar_x)  # straddles: one more batch
    assert acceptance.decided([1.09, 1.2], bar_x) and acceptance.decided([0.9, 1.07], bar_x)


def test_an_update_with_a_decision_is_obeyed_and_one_without_must_be_faster():
    best = {"iteration": 2, "speedup": 1.5}
    assert acceptance.replaces(best, {"speedup": 1.1, "is_new_best": True})
    assert not acceptance.replaces(best, {"speedup": 9.0, "is_new_best": False})
    assert not acceptance.replaces(best, {"speedup": 1.5})
    assert acceptance.replaces({}, {"speedup": 0.5})
    refused = {"is_new_best": False, "speedup": 2.0, "runtime_ms": 1.0, "ref_runtime_ms": 2.0}
    assert acceptance.best_update({"iteration": 3, "code": "x"}, refused, {}) is None


def test_no_other_module_restates_the_bar():
    """The rule's arithmetic (1 + acceptance_margin) appears nowhere else in the library."""
    offenders = []
    for folder in ("graph", "nodes", "tools", "eval"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "acceptance.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.BinOp)
                    and isinstance(node.op, ast.Add)
                    and isinstance(node.left, ast.Constant)
                    and node.left.value == 1.0
                    and "acceptance_margin" in ast.unparse(node.right)
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
