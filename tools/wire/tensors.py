"""Plain helpers on a call's outputs that both sides need: the judge compares outputs it read from
shared memory, and the runner's in-process guards compare the tensors it holds. Neutral, like the
rest of the wire: it imports only torch, so neither side reaches the other's code through it."""

from __future__ import annotations

from typing import Any

import torch


def tensors_of(out: Any) -> list[Any]:
    """A forward's outputs as a list (a single output, a tuple or a list)."""
    return list(out) if isinstance(out, (tuple, list)) else [out]


def bitwise_equal(a: Any, b: Any) -> bool:
    """Exact equality, NaN payloads included (torch.equal treats NaN as unequal)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) else False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    if a.dtype == torch.bool:
        return torch.equal(a, b)
    # Compare the raw bits through an integer view of the same width (byte views are 4x slower).
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size(), torch.uint8)
    return torch.equal(a.contiguous().view(-1).view(width), b.contiguous().view(-1).view(width))
