"""Judging: output comparison, tolerances per dtype, and whether a tolerance can discriminate.

Runs in the judge on tensors it read from shared memory; never imported by a process that runs
candidate code (tests/test_boundary.py keeps it so).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pragma.tools.wire.tensors import bitwise_equal, tensors_of  # noqa: F401 (callers use them from here)


def tolerance_for(dtype: torch.dtype, atol: float, rtol: float) -> tuple[float, float]:
    """fp32/fp64 use the run's atol/rtol (1e-4 by default, as KernelBench); half types at least 1e-2."""
    if dtype in (torch.float16, torch.bfloat16):
        return max(atol, 1e-2), max(rtol, 1e-2)
    return atol, rtol


def _close(n: torch.Tensor, r: torch.Tensor, a_tol: float, r_tol: float) -> tuple[bool, float, float]:
    """(all close, max abs diff, mean abs diff): |n - r| <= atol + rtol * |r| elementwise.

    Written out instead of torch.isclose (about 5x slower on 8M elements here); the NaN/Inf-aware
    isclose runs only when a difference is not finite.
    """
    diff = torch.sub(n, r).abs_()  # fp32 is exact enough to report differences at 1e-4 tolerances; one buffer
    if diff.numel() == 0:
        return True, 0.0, 0.0
    max_abs = float(diff.max())  # NaN propagates through max, so this also tells us if all are finite
    if math.isfinite(max_abs):
        mean_abs = float(diff.mean())
        if max_abs <= a_tol:
            return True, max_abs, mean_abs
        return bool(torch.le(diff, r.abs().mul_(r_tol).add_(a_tol)).all()), max_abs, mean_abs
    finite = torch.nan_to_num(diff, nan=0.0, posinf=0.0)  # NaN/Inf agreement is isclose's job
    close = bool(torch.isclose(n, r, atol=a_tol, rtol=r_tol, equal_nan=True).all())
    return close, float(finite.max()), float(finite.mean())


def _examples(n: torch.Tensor, r: torch.Tensor, close: torch.Tensor, inputs: list[Any], k: int = 2) -> str:
    """The first ``k`` differing elements: index, expected, got, and the value of every input of the
    same shape there. A repair needs a concrete case more than a count: the embedded model, told
    "4098971 of 8198000 elements differ", rewrote its ReLU for an ELU twice; "at [0, 1]: expected
    -0.4512, got 0 (input 0 there: -0.6001)" says which values it gets wrong."""
    flat = torch.nonzero(~close.reshape(-1))[:k, 0].tolist()
    parts = []
    for pos in flat:
        index = list(torch.unravel_index(torch.tensor(pos), tuple(n.shape))) if n.dim() else []
        where = "[" + ", ".join(str(int(i)) for i in index) + "]"
        there = [
            f"input {j} there: {float(x.reshape(-1)[pos]):.4g}"
            for j, x in enumerate(inputs)
            if isinstance(x, torch.Tensor) and tuple(x.shape) == tuple(n.shape) and x.is_floating_point()
        ]
        got = f"at {where}: expected {float(r.reshape(-1)[pos]):.4g}, got {float(n.reshape(-1)[pos]):.4g}"
        parts.append(got + (f" ({'; '.join(there[:2])})" if there else ""))
    return "; ".join(parts)


# The note for a mismatch confined to the rows after the first k (nodes/hints.py knows the wording).
FIRST_ROWS_ONLY = "rows match, every later row differs"


def _rows_note(close: torch.Tensor) -> str:
    """'; only the first k of R rows match, ...' when every row (last dim) before some k > 0 is
    right and every row from k on is wrong, else ''. Why: the embedded model pasted a row-wise
    operator's statements for one row without the loop over rows three times; "N elements differ"
    with two examples from row 1 never told it that row 0 was right."""
    if close.dim() < 2 or close.shape[-1] == 0 or close.numel() == 0:
        return ""
    row_ok = close.reshape(-1, close.shape[-1]).all(dim=1)
    k = int(torch.argmin(row_ok.to(torch.uint8)))  # the first wrong row
    if k == 0 or bool(row_ok[k:].any()):
        return ""
    return f"; only the first {k} of {row_ok.numel()} {FIRST_ROWS_ONLY}"


def compare(ref_out: Any, new_out: Any, atol: float, rtol: float, inputs: list[Any] | None = None) -> dict[str, Any]:
    """Compare outputs; returns ok, message and the max/mean absolute difference. With ``inputs``
    (the call's), a mismatch's message also shows the first differing elements with the inputs'
    values there (inputs of the output's shape only)."""
    refs, news = tensors_of(ref_out), tensors_of(new_out)
    if len(refs) != len(news):
        return {"ok": False, "message": f"expected {len(refs)} outputs, got {len(news)}"}
    max_abs = mean_abs = 0.0
    for i, (r, n) in enumerate(zip(refs, news, strict=True)):
        if why := _form_problem(i, r, n):
            return {"ok": False, "message": why}
        a_tol, r_tol = tolerance_for(r.dtype, atol, rtol)
        if not n.is_floating_point():  # integer/bool outputs must match exactly
            n, r, a_tol, r_tol = n.double(), r.double(), 0.0, 0.0
        elif n.dtype in (torch.float16, torch.bfloat16):
            n, r = n.float(), r.float()
        ok, out_max, out_mean = _close(n, r, a_tol, r_tol)
        max_abs, mean_abs = max(max_abs, out_max), max(mean_abs, out_mean)
        if not ok:
            close = torch.isclose(n, r, atol=a_tol, rtol=r_tol, equal_nan=True)  # only to describe it
            bad = int((~close).sum())
            new_nonfinite = int((~torch.isfinite(n) & torch.isfinite(r)).sum())
            nan_note = f"; {new_nonfinite} NaN/Inf where the reference is finite" if new_nonfinite else ""
            return {
                "ok": False,
                "max_abs_diff": max_abs,
                "mean_abs_diff": mean_abs,
                "message": f"output {i}: {bad} of {n.numel()} elements differ beyond atol={a_tol}, "
                f"rtol={r_tol} (max abs diff {max_abs:.3g}{nan_note}){_rows_note(close)}"
                + (f"; first: {_examples(n, r, close, inputs)}" if inputs is not None else ""),
            }
    return {"ok": True, "max_abs_diff": max_abs, "mean_abs_diff": mean_abs, "message": "outputs match"}


def _form_problem(i: int, r: Any, n: Any) -> str:
    """Why output ``i`` cannot be compared at all ("" when it can)."""
    if not isinstance(n, torch.Tensor):
        return f"output {i} is {type(n).__name__}, expected a tensor"
    if tuple(n.shape) != tuple(r.shape):
        return f"output {i} shape {tuple(n.shape)}, expected {tuple(r.shape)}"
    if n.dtype != r.dtype:
        return f"output {i} dtype {n.dtype}, expected {r.dtype}"
    if n.device != r.device:
        return f"output {i} on {n.device}, expected {r.device}"
    return ""


def precise_bound(
    ref: torch.Tensor, precise: torch.Tensor, magnitude: torch.Tensor | None, a_tol: float, r_tol: float
) -> torch.Tensor:
    """Per element, how far from the float64 reference ``precise`` an honest output may lie (float64).

    ``a_tol + r_tol * max(|ref|, |precise|, magnitude) + |ref - precise|``:
    - ``magnitude`` is the operator on the absolute values of its inputs and weights, in float64:
      for a sum, a dot product, a matmul or a prefix sum it is the sum of the magnitudes of the
      terms (sum |a_i b_i|), which bounds the rounding of *every* summation order (Higham: the
      error of any order is at most ~n·eps times it). On the problem's own all-positive inputs it
      equals |output|, so ``r_tol * magnitude`` judges an output that cancels (mixed signs) exactly
      as strictly as the problem's own inputs are judged: relative to what was summed, not to what
      remained. The caller passes it only for operators affine in their inputs (elsewhere the
      operator on |x| bounds nothing: exp(|x|) is no measure of exp(x)'s error).
    - ``|ref - precise|`` is the fp32 reference's own rounding error: a kernel at least as accurate
      as the reference always passes, and one that accumulates in double is never refused for
      disagreeing with the reference's fp32 rounding.
    - ``max(|ref|, |precise|)`` keeps every output the plain fp32 comparison accepts accepted here.
    """
    r = ref.double()
    scale = torch.maximum(r.abs(), precise.abs())
    if magnitude is not None:
        scale = torch.maximum(scale, magnitude.abs())
    return scale.mul_(r_tol).add_(a_tol).add_(torch.sub(r, precise).abs_())


def compare_precise(
    ref_out: Any,
    precise_out: Any,
    magnitude_out: Any,
    new_out: Any,
    atol: float,
    rtol: float,
    inputs: list[Any] | None = None,
) -> dict[str, Any]:
    """``compare`` judged against a float64 reference (``precise_out``: the reference model and
    inputs in float64) with the bound of ``precise_bound``; ``magnitude_out`` holds, per output,
    the operator on absolute values (float64) or None where the operator is not affine.

    Integer and boolean outputs stay exact against the fp32 reference; where the fp32 or float64
    reference is not finite, the output must agree with the fp32 reference as ``compare`` asks.
    The bound contains ``compare``'s, so an output ``compare`` accepts is accepted here too.
    """
    refs, news, precs = tensors_of(ref_out), tensors_of(new_out), tensors_of(precise_out)
    mags = tensors_of(magnitude_out) if magnitude_out is not None else [None] * len(refs)
    if len(refs) != len(news):
        return {"ok": False, "message": f"expected {len(refs)} outputs, got {len(news)}"}
    if len(precs) != len(refs) or len(mags) != len(refs):
        return compare(ref_out, new_out, atol, rtol, inputs=inputs)  # nothing better to judge with
    max_abs = mean_abs = 0.0
    for i, (r, n, p, m) in enumerate(zip(refs, news, precs, mags, strict=True)):
        if why := _form_problem(i, r, n):
            return {"ok": False, "message": why}
        usable = (
            r.is_floating_point()
            and isinstance(p, torch.Tensor)
            and p.dtype == torch.float64
            and tuple(p.shape) == tuple(r.shape)
            and (m is None or (isinstance(m, torch.Tensor) and tuple(m.shape) == tuple(r.shape)))
        )
        if not usable:  # integer outputs (exact), or no float64 value for this output
            one = compare(r, n, atol, rtol, inputs=inputs)
            if not one["ok"]:
                return {**one, "message": one["message"].replace("output 0", f"output {i}", 1)}
            max_abs, mean_abs = max(max_abs, one["max_abs_diff"]), max(mean_abs, one["mean_abs_diff"])
            continue
        a_tol, r_tol = tolerance_for(r.dtype, atol, rtol)
        bound = precise_bound(r, p, m, a_tol, r_tol)
        diff = torch.sub(n.double(), p).abs_()
        finite = torch.isfinite(r) & torch.isfinite(p)
        close = diff.le(bound) & finite  # NaN differences compare False: a NaN output fails
        if not bool(finite.all()):  # non-finite references: agree with the fp32 one, as compare asks
            nf = ~finite
            close |= nf & torch.isclose(n.float(), r.float(), atol=a_tol, rtol=r_tol, equal_nan=True)
        shown = diff.masked_fill(~finite, 0.0).nan_to_num_(0.0, 0.0, 0.0)
        out_max = float(shown.max()) if shown.numel() else 0.0
        out_mean = float(shown.mean()) if shown.numel() else 0.0
        max_abs, mean_abs = max(max_abs, out_max), max(mean_abs, out_mean)
        if not bool(close.all()):
            bad = int((~close).sum())
            new_nonfinite = int((~torch.isfinite(n) & torch.isfinite(r)).sum())
            nan_note = f"; {new_nonfinite} NaN/Inf where the reference is finite" if new_nonfinite else ""
            what = "max(|reference|, the magnitudes summed)" if m is not None else "|reference|"
            return {
                "ok": False,
                "max_abs_diff": max_abs,
                "mean_abs_diff": mean_abs,
                "judged": "float64",
                "message": f"output {i}: {bad} of {n.numel()} elements differ from the float64 reference "
                f"beyond atol={a_tol} + rtol={r_tol} x {what} + the fp32 reference's own rounding "
                f"(max abs diff {out_max:.3g}{nan_note}){_rows_note(close)}"
                + (f"; first: {_examples(n.double(), p, close, inputs)}" if inputs is not None else ""),
            }
    return {
        "ok": True,
        "max_abs_diff": max_abs,
        "mean_abs_diff": mean_abs,
        "judged": "float64",
        "message": "outputs match (against a float64 reference)",
    }


def affine_outputs(base: Any, zero: Any, double: Any, negated: Any, rel: float = 1e-8) -> list[bool]:
    """Per output: is the operator affine along this input (f(2x) = 2f(x) - f(0) and
    f(-x) = 2f(0) - f(x), in float64 up to ``rel`` of the outputs' peak)?

    An affine operator (sum, mean, matmul, conv, cumsum, a linear layer with its bias) sums terms
    each linear in the input, so its value on absolute values bounds its rounding; ReLU passes the
    first test (positively homogeneous) and fails the second, softmax, norms and losses fail both.
    """
    out = []
    for b, z, d, ng in zip(tensors_of(base), tensors_of(zero), tensors_of(double), tensors_of(negated), strict=True):
        if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (b, z, d, ng)):
            out.append(False)
            continue
        if not all(t.shape == b.shape for t in (z, d, ng)):
            out.append(False)
            continue
        b64, z64, d64, n64 = (t.double() for t in (b, z, d, ng))
        if not all(bool(torch.isfinite(t).all()) for t in (b64, z64, d64, n64)):
            out.append(False)
            continue
        peak = max(float(t.abs().max()) if t.numel() else 0.0 for t in (b64, z64, d64, n64))
        tol = rel * max(peak, 1e-300)
        second = float((d64 - 2 * b64 + z64).abs().max()) if b64.numel() else 0.0
        odd = float((n64 + b64 - 2 * z64).abs().max()) if b64.numel() else 0.0
        out.append(second <= tol and odd <= tol)
    return out


def degenerate_tolerance(ref_out: Any, atol: float, rtol: float) -> str | None:
    """Why this reference output cannot tell a real kernel from a constant one, or None."""
    for i, r in enumerate(tensors_of(ref_out)):
        if not isinstance(r, torch.Tensor) or not r.is_floating_point() or r.numel() == 0:
            continue
        a_tol, r_tol = tolerance_for(r.dtype, atol, rtol)
        lo, hi = (float(v) for v in torch.aminmax(r.float()))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            finite = r[torch.isfinite(r)].float()
            if finite.numel() == 0:
                continue
            lo, hi = (float(v) for v in torch.aminmax(finite))
        peak = max(abs(lo), abs(hi))
        # zeros pass iff every |r| <= atol + rtol*|r|, i.e. max|r| * (1 - rtol) <= atol
        if peak * (1 - r_tol) <= a_tol:
            return (
                f"output {i}: an all-zeros output passes atol={a_tol}, rtol={r_tol} (max |reference| = "
                f"{peak:.3g}); tighten atol or rescale the problem"
            )
        # A constant can only pass if the spread fits in the tolerance (cheap test first).
        mid = (lo + hi) / 2
        if (hi - lo) / 2 <= a_tol + r_tol * peak and _close(torch.full_like(r, mid), r, a_tol, r_tol)[0]:
            return (
                f"output {i}: a constant output ({mid:.3g}) passes atol={a_tol}, rtol={r_tol} "
                f"(reference spans [{lo:.3g}, {hi:.3g}]); tighten atol or rescale the problem"
            )
    return None
