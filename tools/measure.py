"""Seeded problem inputs, and the comparison functions under their historical names.

The verification itself is the judge's (``judge.py``, outside any process that runs candidate
code); this module keeps what the profiled region (``region.py``, ``gpu_worker.py``) needs and the
names tests and callers used before the split.
"""

from __future__ import annotations

from typing import Any

import torch

from pragma.tools.compare import compare, degenerate_tolerance, tolerance_for  # noqa: F401 - re-exported


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _inputs(problem, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    return list(problem.get_inputs())
