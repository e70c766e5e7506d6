"""Correctness: the seeded trials, the comparison with the reference (and its float64 yardstick
for close calls), and the stress variants (``stress.py``) that a first trial alone cannot decide."""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from pragma.tools.judging import compare as cmp_mod
from pragma.tools.judging import freshen, stress
from pragma.tools.judging.base import JudgeState
from pragma.tools.judging.runners import _nbytes
from pragma.tools.judging.verdicts import Decided

SETTLE_S = 0.02  # the first trial waits this long before checking that the output stopped changing


# The judge's torch threads outside the timed rounds (trials, stress variants, re-check): its copies
# and comparisons of 32 MB outputs ran on one core while the other idled (check phase 1.25 -> 1.07 s
# for the ReLU example). Back to num_threads for the timed rounds, whose audits run between calls.
JUDGE_CHECK_THREADS = max(1, min(2, len(os.sched_getaffinity(0))))


class Correctness(JudgeState):
    """The checks before timing and the held-out re-check's comparison. Mixed into ``session.Judge``
    (state: ``ref_outs``, ``max_abs``/``mean_abs``, ``affine``, ``precise_info``, ``extra``)."""

    # --- checks -----------------------------------------------------------------------------------

    def _inputs_intact(self, role: str, masters: list[Any], label: str) -> None:
        for i, (master, now) in enumerate(zip(masters, self.bindings[role].views, strict=True)):
            if isinstance(master, torch.Tensor) and not cmp_mod.bitwise_equal(master, now):
                raise self.v.reject(
                    "inputs_unmodified", f"{label}: input {i} was modified by the call (seen in shared memory)"
                )

    def checked_call(
        self,
        masters: list[Any],
        ref_out: Any,
        label: str,
        *,
        settle_s: float = 0.0,
        mismatch_rule: str | None = None,
        role: str = "candidate",
        stale_ref: Any = None,
        atol: float | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """One candidate call under every per-call rule; returns (output, reply)."""
        # Triton after the release: the hook hiding the interpreter's aten plumbing is gone.
        record = not (self.released and self.req["backend"] == "gpu")
        rep = self.call(role, record=record, count=True, check=True)
        # Fetched first, one round trip after forward returned: later work on the output (a thread
        # still writing it) shows as a difference from the second fetch below.
        out = self.fetch(role)
        self._inputs_intact(role, masters, label)
        ops = rep.get("compute_ops") if isinstance(rep.get("compute_ops"), list) else []
        if ops:
            raise self.v.reject(
                "no_torch_compute",
                f"{label}: forward dispatched torch compute ops: {', '.join(str(o)[:60] for o in ops[:8])}",
            )
        if downs := (rep.get("downcasts") if isinstance(rep.get("downcasts"), list) else []):
            raise self.v.reject(
                "no_precision_downgrade", f"{label}: forward converted {', '.join(map(str, downs[:3]))}"
            )
        if form := str(rep.get("form") or ""):
            raise self.v.reject("plain_dense_output", f"{label}: {form[:200]}")
        if overlap := str(rep.get("overlap") or ""):
            raise self.v.reject("fresh_output", f"{label}: {overlap[:200]}")
        # One comparison per call, reused below (``out`` is the judge's own copy: it cannot change).
        # At 8M elements each comparison costs ~25 ms; three per call were a fifth of the check phase.
        cmp = cmp_mod.compare(ref_out, out, self.atol if atol is None else atol, self.rtol, inputs=masters)
        if not cmp["ok"]:
            cmp = self.precise_compare(ref_out, out, self.atol if atol is None else atol, cmp, inputs=masters)
        if not settle_s and not cmp["ok"]:
            # A wrong answer that is still changing is work finishing after forward returned (a
            # thread racing the fetch): say so, rather than call it a wrong kernel by luck of timing.
            settle_s = SETTLE_S
        if settle_s:
            time.sleep(settle_s)
            later = self.fetch(role, copy=False)
            if not all(
                cmp_mod.bitwise_equal(a, b)
                for a, b in zip(cmp_mod.tensors_of(out), cmp_mod.tensors_of(later), strict=True)
            ):
                raise self.v.reject("output_stable", f"{label}: the output changed after forward returned")
        if (
            stale_ref is not None
            and not (cmp if atol is None else cmp_mod.compare(ref_out, out, self.atol, self.rtol))["ok"]
            and cmp_mod.compare(stale_ref, out, self.atol, self.rtol)["ok"]
        ):
            raise self.v.reject(
                "stateless", f"{label}: new values in the same buffers gave the previous inputs' answer"
            )
        self._compare(ref_out, out, label, mismatch_rule, atol=atol, cmp=cmp)
        return out, rep

    def _compare(
        self,
        ref_out: Any,
        out: Any,
        label: str,
        mismatch_rule: str | None = None,
        atol: float | None = None,
        cmp: dict[str, Any] | None = None,
    ) -> None:
        ref_dev = self.extra.get("devices", {}).get("reference")
        new_dev = self.extra.get("devices", {}).get("candidate")
        if ref_dev and new_dev and ref_dev != new_dev and mismatch_rule is None:
            raise self.v.mismatch(f"{label}: output on {new_dev}, expected {ref_dev}", {})
        if cmp is None:
            cmp = cmp_mod.compare(ref_out, out, self.atol if atol is None else atol, self.rtol)
        if atol is None:  # a stress variant's differences are on another scale: not the kernel's figure
            self.max_abs: float = max(self.max_abs, cmp.get("max_abs_diff", 0.0))
            self.mean_abs: float = max(self.mean_abs, cmp.get("mean_abs_diff", 0.0))
        if not cmp["ok"]:
            if mismatch_rule:
                raise self.v.reject(mismatch_rule, f"{label}: {cmp['message']}")
            raise self.v.mismatch(f"{label}: {cmp['message']}", cmp)

    # --- rounding: the float64 yardstick (compare.compare_precise) ----------------------------------

    def _precise(self, **header: Any) -> Any:
        """The reference's float64 output on the inputs its runner holds (see Runner.op_precise), or
        None when it cannot compute in float64 (its outputs are then not float64)."""
        rep = self.ask("reference", {"op": "precise", **header})
        if rep.get("ok") is not True:
            self.precise_info["unavailable"] = str(rep.get("error", "failed"))[:200]
            return None
        return self.fetch("reference", precise=True)

    def _affine(self, base: Any) -> list[bool]:
        """Per output: is the reference affine in each of its float inputs (compare.affine_outputs)?
        Decided once per verification, in float64, on the inputs the reference runner holds
        (``base``: its float64 output on them, already fetched by the caller)."""
        if self.affine is None:
            views = self.bindings["reference"].views
            floats = [i for i, x in enumerate(views) if isinstance(x, torch.Tensor) and x.is_floating_point()]
            flags: list[bool] | None = None
            for j in floats if base is not None else []:
                probes = []
                for factor in (0.0, 2.0, -1.0):
                    scales = [factor if i == j else 1.0 for i in range(len(views))]
                    probes.append(self._precise(scales=scales))
                if any(p is None for p in probes):
                    flags = None
                    break
                one = cmp_mod.affine_outputs(base, *probes)
                flags = one if flags is None else [a and b for a, b in zip(flags, one, strict=True)]
            self.affine: list[bool] | None = flags if flags is not None else []
            self.precise_info["affine"] = list(self.affine)
        return self.affine

    def precise_compare(
        self, ref_out: Any, out: Any, atol: float, cmp: dict[str, Any], inputs: list[Any] | None = None
    ) -> dict[str, Any]:
        """A failed fp32 comparison judged again against the reference in float64, with a bound that
        grows with the magnitudes summed where the operator is affine (compare.compare_precise).

        Why: fp32 kernels that sum in another order (16-lane FMA accumulators, blocked, pairwise) or
        in double were refused on outputs that cancel (a matrix-vector product on mixed signs: 3 of
        256 outputs), the fp32 reference's own rounding being larger than the tolerance there.
        The reference runner must hold the inputs the candidate was called on (every caller has
        just called it on them). Costs nothing for outputs the fp32 comparison accepts."""
        if not any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in cmp_mod.tensors_of(ref_out)):
            return cmp  # integer and boolean outputs are compared exactly, never against float64
        started = time.perf_counter()
        try:
            precise = self._precise()
            if precise is None:
                return cmp
            affine = self._affine(precise)
            magnitude: list[Any] = [None] * len(cmp_mod.tensors_of(ref_out))
            if any(affine) and len(affine) == len(magnitude):
                mags = cmp_mod.tensors_of(self._precise(magnitude=True))
                magnitude = [m if a else None for m, a in zip(mags, affine, strict=True)]
            judged = cmp_mod.compare_precise(ref_out, precise, magnitude, out, atol, self.rtol, inputs=inputs)
        finally:
            self.precise_info["calls"] = int(self.precise_info.get("calls", 0)) + 1
            self.precise_info["s"] = round(float(self.precise_info.get("s", 0.0)) + time.perf_counter() - started, 3)
        self.precise_info["accepted"] = int(self.precise_info.get("accepted", 0)) + bool(judged["ok"])
        return judged

    def reference_output(self, inputs: list[Any]) -> Any:
        self.bindings["reference"].write(inputs)
        self.call("reference")
        return self.fetch("reference")

    def correctness(self) -> int:
        self.announce("check")
        torch.set_num_threads(JUDGE_CHECK_THREADS)
        self.guard("after loading the candidate")
        traffic = 0
        compiled = 0
        masters: list[Any] = []
        ref_out: Any = None
        out: Any = None
        for t, seed in enumerate(self.seeds["trials"]):
            masters = self._inputs(seed)
            prev_ref = ref_out
            ref_out = self.reference_output(masters)
            self.ref_outs.append(ref_out)
            if t == 0:
                why = cmp_mod.degenerate_tolerance(ref_out, self.atol, self.rtol)
                if why:  # judged across the stress variants instead (a scalar loss is decidable there)
                    self.degenerate_first = why
                else:
                    self.v.note("tolerance_discriminates", "pass", "zeros/constant outputs fail the tolerance")
            self.bindings["candidate"].write(masters)
            out, rep = self.checked_call(
                masters, ref_out, f"trial {t}", settle_s=SETTLE_S if t == 0 else 0.0, stale_ref=prev_ref
            )
            compiled += int(rep.get("compiled_calls", 0) or 0) if type(rep.get("compiled_calls")) is int else 0
            if t == 0:
                traffic = _nbytes(masters) + _nbytes(out)
        for rule in ("inputs_unmodified", "no_torch_compute", "plain_dense_output", "fresh_output", "output_stable"):
            self.v.note(rule, "pass", "runtime (every correctness call; ops recorded in the candidate's process)")
        if compiled <= 0:
            raise self.v.reject("compiled_code_ran", "forward never called the candidate's compiled library")
        self.v.note("compiled_code_ran", "pass", f"{compiled} calls into the candidate's compiled code")

        again, _ = self.checked_call(masters, ref_out, "repeat call")
        same = all(
            cmp_mod.bitwise_equal(a, b) for a, b in zip(cmp_mod.tensors_of(again), cmp_mod.tensors_of(out), strict=True)
        )
        self.v.note(
            "deterministic",
            "pass" if same else "warn",
            "bitwise identical" if same else "two calls on the same inputs differ (within tolerance)",
        )

        # Same buffers, a few elements changed: a cache keyed on addresses, shapes or sampled
        # values returns the old answer.
        gen = torch.Generator().manual_seed(self.seeds["stateless"])
        plans = freshen.plan(masters)
        if plans:
            changes = freshen.step(plans, masters, gen)
            freshen.apply(changes, self.bindings["candidate"].views)
            how = f"{sum(len(c[1]) for c in changes)} elements changed in place"
        else:
            masters = self._inputs(self.seeds["stateless"])
            self.bindings["candidate"].write(masters)
            how = "buffers refilled with a new input set (no input can change in place)"
        ref_new = self.reference_output(masters)
        self.checked_call(masters, ref_new, "changed inputs", mismatch_rule="stateless")
        self.v.note("stateless", "pass", f"{how}: the new answer")
        self.stress()
        for role in [r for r in ("candidate", "best") if r in self.runners]:
            self.ask(role, {"op": "release"})
        self.released = True
        self.guard("after the correctness trials")
        return traffic

    def _reference_or_error(self, inputs: list[Any]) -> tuple[Any, str]:
        """The reference's output on ``inputs``, or why its call failed (a stress variant skips)."""
        self.bindings["reference"].write(inputs)
        rep = self.ask("reference", {"op": "call"})
        if rep.get("ok") is not True:
            return None, str(rep.get("error", "forward failed"))
        return self.fetch("reference"), ""

    def stress(self) -> None:
        """The candidate on the stress variants of a fresh, unseen draw (tools/judging/stress.py, issue 12)."""
        started = time.perf_counter()
        # A draw the candidate never saw, from a secret seed: variants of the inputs it was called on
        # could be recognised (a fingerprint of what it last saw, negated or scaled) and answered
        # from memory. Its structure is judged on that pristine draw, not on the probe's edit.
        masters = self._inputs(self.seeds["stress"] ^ 0x5EED5)
        gen = torch.Generator().manual_seed(self.seeds["stress"])
        variants, skipped = stress.stress_variants(masters, gen)
        used: list[str] = []
        skipped_out = [stress.Skipped(name=str(s["name"]), reason=str(s["reason"])[:200]) for s in skipped]
        # Filled as the variants run, so a mismatch still reports what was used and which one failed.
        report = self.extra["stress"] = {
            "used": used,
            "skipped": skipped_out,
            "trials": len(self.ref_outs),
            "structures": stress.describe_structures(masters),
        }
        base_peak = stress.output_peak(self.ref_outs[-1]) if self.ref_outs else 0.0
        judged = [(r, self.atol, self.rtol) for r in self.ref_outs]
        for name, inputs, ref_out, atol in stress.judgeable(
            variants, self._reference_or_error, base_peak, self.atol, skipped_out
        ):
            self.bindings["candidate"].write(inputs)
            try:
                self.checked_call(
                    inputs, ref_out, f"correct on the problem's inputs, wrong on {name} inputs", atol=atol
                )
            except Decided as d:
                report["failed"] = name
                if d.result.get("status") == "mismatch":
                    self.v.note("stress_inputs", "fail", str(d.result.get("message", ""))[:300])
                raise
            finally:
                report["stress_s"] = round(time.perf_counter() - started, 3)
            used.append(name)
            judged.append((ref_out, atol, self.rtol))
        why = stress.degenerate_across(judged)
        report["stress_s"] = round(time.perf_counter() - started, 3)
        if why:
            raise self.v.reject(
                "tolerance_discriminates",
                f"across the {len(self.ref_outs)} trials and {len(used)} stress variants: {why}",
            )
        if self.degenerate_first:
            self.v.note(
                "tolerance_discriminates",
                "pass",
                f"a fixed output fails on at least one of {len(used)} "
                "stress variants (the problem's own inputs alone could not tell)",
            )
        self.v.note(
            "stress_inputs",
            "pass" if used else "warn",
            f"matches on {', '.join(used)}"
            if used
            else "no stress variant could be judged: "
            + "; ".join(f"{s['name']}: {s['reason']}" for s in skipped_out)[:300],
        )
