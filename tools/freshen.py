"""Judging: make every timed call's inputs new without changing what kind of inputs they are.

Between timed calls (outside the timed region, the same change for reference, candidate and best)
a few random elements of each floating-point input swap values among themselves (a cyclic shift
of ``positions`` values). That keeps the input's multiset of values (its distribution), its zero
pattern (only non-zero positions are chosen: triangular, diagonal, masked inputs stay so) and its
symmetry (a symmetric matrix changes mirrored pairs, chosen in the upper triangle so no change
undoes another). Integer and bool tensors (indices, masks, sizes) are left as they are. When no
input can change (all-integer or constant inputs) the caller draws a fresh set from the problem's
``get_inputs()`` instead.

Cost: O(positions) writes per tensor per call, so a memo of any size never hits, while caches and
the allocator stay as warm as in a real repeated call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

POSITIONS = 8  # elements changed per tensor per call


@dataclass
class Plan:
    index: int  # which input
    symmetric: bool  # mirror every change across the last two dims


def plan(inputs: list[Any]) -> list[Plan]:
    """Which inputs can change in place (floating point, contiguous, more than one distinct value)."""
    plans = []
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 2:
            continue
        if not x.is_contiguous():
            continue
        flat = x.reshape(-1)
        if bool((flat == flat[0]).all()):
            continue  # a constant tensor: permuting changes nothing
        symmetric = x.dim() >= 2 and x.shape[-1] == x.shape[-2] and torch.equal(x, x.transpose(-1, -2))
        plans.append(Plan(index=i, symmetric=symmetric))
    return plans


def _positions(x: torch.Tensor, symmetric: bool, gen: torch.Generator) -> torch.Tensor:
    """Flat positions of non-zero elements (strict upper triangle for symmetric inputs: the
    diagonal holds values once, the rest twice, so the two sets never mix)."""
    n = x.numel()
    tries = torch.randint(0, n, (POSITIONS * 8,), generator=gen)
    flat = x.reshape(-1)
    keep = flat[tries] != 0
    if symmetric:
        cols = x.shape[-1]
        keep &= (tries % cols) > (tries // cols) % cols  # strictly upper: each value stays in two places
    chosen = torch.unique(tries[keep])
    return chosen[torch.randperm(chosen.numel(), generator=gen)[:POSITIONS]]


def _mirror(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    plane = cols * cols
    base, rem = pos // plane * plane, pos % plane
    return base + (rem % cols) * cols + rem // cols


def step(plans: list[Plan], masters: list[Any], gen: torch.Generator) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """Change ``masters`` in place; returns (input index, flat positions, new values) to apply to
    every copy of the inputs (each runner's shared region) so all stay identical."""
    changes = []
    for p in plans:
        x = masters[p.index]
        pos = _positions(x, p.symmetric, gen)
        if pos.numel() < 2:
            continue
        flat = x.view(-1)
        values = flat[pos].roll(1)
        if p.symmetric:
            pos = torch.cat([pos, _mirror(x, pos)])
            values = torch.cat([values, values])
        flat[pos] = values
        changes.append((p.index, pos, values))
    return changes


def apply(changes: list[tuple[int, torch.Tensor, torch.Tensor]], copy: list[Any]) -> None:
    for index, pos, values in changes:
        copy[index].view(-1)[pos] = values
