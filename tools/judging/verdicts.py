"""The judge's verdicts: the ``checks`` list and the early end of a verification (``Decided``)."""

from __future__ import annotations

from typing import Any

from pragma.tools.judging.rules import RULES


class Decided(Exception):
    """A verdict reached before the end: carries the result."""

    def __init__(self, result: dict[str, Any]):
        super().__init__(result.get("message", ""))
        self.result = result


class Verdicts:
    """The ``checks`` list: one entry per rule, the first failure decides the status."""

    def __init__(self) -> None:
        self.checks: list[dict[str, str]] = []

    def note(self, rule: str, verdict: str, detail: str = "") -> None:
        if rule not in RULES:
            raise KeyError(f"unregistered rule {rule!r}")
        self.checks.append({"rule": rule, "verdict": verdict, "detail": detail[:500]})

    def reject(self, rule: str, detail: str) -> Decided:
        self.note(rule, "fail", detail)
        return Decided({"status": "rejected", "message": f"rule {rule}: {detail}"})

    def mismatch(self, message: str, cmp: dict[str, Any]) -> Decided:
        return Decided(
            {
                "status": "mismatch",
                "message": message,
                "max_abs_diff": cmp.get("max_abs_diff", 0.0),
                "mean_abs_diff": cmp.get("mean_abs_diff", 0.0),
            }
        )
