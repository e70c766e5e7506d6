"""In-sandbox measurement: correctness trials with the runtime anti-cheat checks, then timing.

Only the worker imports this module, before it imports the candidate: the timer functions below
are bound at that moment, so a candidate that patches ``time`` cannot change what we measure.

Order of one verification (phases announced to the parent, which applies the deadlines):
check: correctness trials on fresh seeded inputs (reference on its own copy), determinism,
a stateless probe (same buffers, new values), process-level guards; time: interleaved rounds of
reference, [best,] candidate after a warm-up; recheck: guards again and a held-out trial whose
seed the parent never reports.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns, process_time_ns
from typing import Any

import torch

from pragma.tools import guards
from pragma.tools.anticheat import RULES

WARMUP_MAX_ROUNDS = 10_000  # bounds warm-up by time for very short kernels
SETTLE_S = 0.02  # how long the first trial waits before checking that the output stopped changing


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _inputs(problem, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    return list(problem.get_inputs())


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
    diff = (n - r).abs()  # fp32 is exact enough to report differences at 1e-4 tolerances
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


def compare(ref_out: Any, new_out: Any, atol: float, rtol: float) -> dict[str, Any]:
    """Compare outputs; returns ok, message and the max/mean absolute difference."""
    refs, news = guards.tensors_of(ref_out), guards.tensors_of(new_out)
    if len(refs) != len(news):
        return {"ok": False, "message": f"expected {len(refs)} outputs, got {len(news)}"}
    max_abs = mean_abs = 0.0
    for i, (r, n) in enumerate(zip(refs, news, strict=True)):
        if not isinstance(n, torch.Tensor):
            return {"ok": False, "message": f"output {i} is {type(n).__name__}, expected a tensor"}
        if tuple(n.shape) != tuple(r.shape):
            return {"ok": False, "message": f"output {i} shape {tuple(n.shape)}, expected {tuple(r.shape)}"}
        if n.dtype != r.dtype:
            return {"ok": False, "message": f"output {i} dtype {n.dtype}, expected {r.dtype}"}
        if n.device != r.device:
            return {"ok": False, "message": f"output {i} on {n.device}, expected {r.device}"}
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
            return {"ok": False, "max_abs_diff": max_abs, "mean_abs_diff": mean_abs,
                    "message": f"output {i}: {bad} of {n.numel()} elements differ beyond atol={a_tol}, "
                               f"rtol={r_tol} (max abs diff {max_abs:.3g}{nan_note})"}
    return {"ok": True, "max_abs_diff": max_abs, "mean_abs_diff": mean_abs, "message": "outputs match"}


def degenerate_tolerance(ref_out: Any, atol: float, rtol: float) -> str | None:
    """Why this reference output cannot tell a real kernel from a constant one, or None."""
    for i, r in enumerate(guards.tensors_of(ref_out)):
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
            return (f"output {i}: an all-zeros output passes atol={a_tol}, rtol={r_tol} (max |reference| = "
                    f"{peak:.3g}); tighten atol or rescale the problem")
        # A constant can only pass if the spread fits in the tolerance (cheap test first).
        mid = (lo + hi) / 2
        if (hi - lo) / 2 <= a_tol + r_tol * peak and _close(torch.full_like(r, mid), r, a_tol, r_tol)[0]:
            return (f"output {i}: a constant output ({mid:.3g}) passes atol={a_tol}, rtol={r_tol} "
                    f"(reference spans [{lo:.3g}, {hi:.3g}]); tighten atol or rescale the problem")
    return None


class Verdicts:
    """The ``checks`` list of a result: one entry per rule, the first failure decides the status."""

    def __init__(self) -> None:
        self.checks: list[dict[str, str]] = []

    def note(self, rule: str, verdict: str, detail: str = "") -> None:
        if rule not in RULES:  # every verdict must name a documented rule
            raise KeyError(f"unregistered rule {rule!r}")
        self.checks.append({"rule": rule, "verdict": verdict, "detail": detail[:500]})

    def reject(self, rule: str, detail: str) -> dict[str, Any]:
        self.note(rule, "fail", detail)
        return {"status": "rejected", "message": f"rule {rule}: {detail}", "checks": self.checks}

    def mismatch(self, message: str, cmp: dict[str, Any]) -> dict[str, Any]:
        return {"status": "mismatch", "message": message, "max_abs_diff": cmp.get("max_abs_diff", 0.0),
                "mean_abs_diff": cmp.get("mean_abs_diff", 0.0), "checks": self.checks}


class _Trials:
    """Runs candidate calls under the per-call runtime rules."""

    def __init__(self, candidate, counter: guards.CallCounter, verdicts: Verdicts, atol: float, rtol: float):
        self.candidate, self.counter, self.v = candidate, counter, verdicts
        self.atol, self.rtol = atol, rtol
        self.kept: list[Any] = []  # earlier outputs stay alive so new outputs cannot reuse their memory
        self.max_abs = self.mean_abs = 0.0

    def call(self, inputs: list[Any], ref_out: Any, label: str, *, record_ops: bool = False,
             settle_s: float = 0.0, mismatch_rule: str | None = None) -> tuple[Any, dict[str, Any] | None]:
        """One checked call; returns (output, failure result or None)."""
        pristine = _clone(inputs)
        recorder = guards.OpRecorder() if record_ops else None
        with self.counter.counting():
            if recorder is not None:
                with recorder:
                    out = self.candidate(*inputs)
            else:
                out = self.candidate(*inputs)
        snap = guards.snapshot(out)  # what forward returned, before any later work can change it
        for i, (before, after) in enumerate(zip(pristine, inputs, strict=True)):
            if isinstance(before, torch.Tensor) and not guards.bitwise_equal(before, after):
                return out, self.v.reject("inputs_unmodified", f"{label}: input {i} was modified by the call")
        if recorder is not None and recorder.compute:
            ops = ", ".join(dict.fromkeys(recorder.compute))
            return out, self.v.reject("no_torch_compute", f"{label}: forward dispatched torch compute ops: {ops}")
        if recorder is not None and recorder.downcasts:
            return out, self.v.reject("no_precision_downgrade", f"{label}: forward converted "
                                      f"{', '.join(recorder.downcasts)}")
        others = guards.tensors_of(ref_out) + [x for x in inputs if isinstance(x, torch.Tensor)]
        for k in self.kept:
            others += guards.tensors_of(k)
        for i, t in enumerate(guards.tensors_of(out)):
            if (why := guards.output_form_problem(t)) is not None:
                return out, self.v.reject("plain_dense_output", f"{label}: output {i}: {why}")
            if any(guards.overlaps(t, o) for o in others):
                return out, self.v.reject("fresh_output", f"{label}: output {i} shares memory with an input, "
                                          "the reference output or an earlier output")
        cmp = compare(ref_out, snap if len(snap) > 1 or isinstance(out, (tuple, list)) else snap[0],
                      self.atol, self.rtol)
        self.max_abs = max(self.max_abs, cmp.get("max_abs_diff", 0.0))
        self.mean_abs = max(self.mean_abs, cmp.get("mean_abs_diff", 0.0))
        if settle_s:
            time.sleep(settle_s)
        if not guards.same_as_snapshot(out, snap):
            return out, self.v.reject("output_stable", f"{label}: the output changed after forward returned")
        if not cmp["ok"]:
            if mismatch_rule:
                return out, self.v.reject(mismatch_rule, f"{label}: {cmp['message']}")
            return out, self.v.mismatch(f"{label}: {cmp['message']}", cmp)
        self.kept.append(out)
        return out, None


def _nbytes(values: Any) -> int:
    return sum(t.numel() * t.element_size() for t in guards.tensors_of(values) if isinstance(t, torch.Tensor))


def _contains_reference(candidate, reference) -> bool:
    modules = candidate.modules() if hasattr(candidate, "modules") else [candidate]
    return any(isinstance(m, type(reference)) for m in modules)


def _refill(inputs: list[Any], fresh: list[Any]) -> None:
    """New values into the same buffers (same addresses, shapes and strides)."""
    for old, new in zip(inputs, fresh, strict=True):
        if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor) and old.shape == new.shape:
            old.copy_(new)


def verify(req: dict[str, Any], workdir: Path, problem, reference, candidate,
           announce: Callable[[Path, str], None], *, best=None, baseline: guards.Baseline,
           counter: guards.CallCounter) -> dict[str, Any]:
    atol, rtol, seed = float(req["atol"]), float(req["rtol"]), int(req["seed"])
    n_threads = int(req["num_threads"])
    # Each OpenMP runtime in the process (torch's, the candidate's) may keep n-1 pool threads.
    allowance = 2 * (n_threads - 1)
    v = Verdicts()
    announce(workdir, "check")

    def guard_failure(when: str) -> dict[str, Any] | None:
        found = baseline.findings(allowance)
        if found:
            return v.reject(found[0][0], f"{when}: {found[0][1]}")
        return None

    with torch.no_grad():
        if failure := guard_failure("after loading the candidate"):
            return failure
        if _contains_reference(candidate, reference):
            return v.reject("no_reference_model", "ModelNew is (or contains) an instance of the reference Model")
        trials = _Trials(candidate, counter, v, atol, rtol)
        traffic_bytes = 0
        inputs: list[Any] = []
        ref_out: Any = None
        out: Any = None
        for trial in range(int(req["correctness_trials"])):
            inputs = _inputs(problem, seed + 1000 + trial)
            ref_out = reference(*_clone(inputs))  # the reference runs on its own copy
            if trial == 0:
                if why := degenerate_tolerance(ref_out, atol, rtol):
                    return v.reject("tolerance_discriminates", why)
                v.note("tolerance_discriminates", "pass", "zeros/constant outputs fail the tolerance")
            out, failure = trials.call(inputs, ref_out, f"trial {trial}", record_ops=trial == 0,
                                       settle_s=SETTLE_S if trial == 0 else 0.0)
            if failure:
                return failure
            if trial == 0:
                traffic_bytes = _nbytes(inputs) + _nbytes(out)
        for rule in ("inputs_unmodified", "no_torch_compute", "plain_dense_output", "fresh_output", "output_stable"):
            v.note(rule, "pass", "runtime")
        if counter.calls == 0:
            return v.reject("compiled_code_ran", "forward never called the candidate's compiled library")
        v.note("compiled_code_ran", "pass", f"{counter.calls} calls into the candidate's compiled code")

        # Determinism: the same inputs again (also a second chance for a cache to show itself).
        again, failure = trials.call(inputs, ref_out, "repeat call")
        if failure:
            return failure
        same = all(guards.bitwise_equal(a, b) for a, b in
                   zip(guards.tensors_of(again), guards.tensors_of(out), strict=True))
        v.note("deterministic", "pass" if same else "warn",
               "bitwise identical" if same else "two calls on the same inputs differ (within tolerance)")

        # Same buffers, new values: a cache keyed on addresses or shapes returns the old answer.
        _refill(inputs, _inputs(problem, seed + 1500))
        ref_new = reference(*_clone(inputs))
        _, failure = trials.call(inputs, ref_new, "refilled inputs", mismatch_rule="stateless")
        if failure:
            return failure
        v.note("stateless", "pass", "refilled buffers give the new answer")
        counter.release()
        if failure := guard_failure("after the correctness trials"):
            return failure
        timer = time_interleaved
        if req.get("device", "cpu") == "cuda":  # GPU: events + device sync + L2 flush (gpu_timing.py)
            from pragma.tools import gpu_timing

            if why := gpu_timing.side_stream_problem(candidate, inputs):
                return v.reject("no_side_streams", why)
            v.note("no_side_streams", "pass", "runtime: launches on the current stream; output final at return")
            timer = gpu_timing.timer_for(req.get("gpu_timing", "events"))

        announce(workdir, "time")
        impls = [("reference", reference), ("candidate", candidate)] + ([("best", best)] if best is not None else [])
        timing = timer(impls, _inputs(problem, seed + 2000), int(req["warmup_calls"]),
                       float(req.get("warmup_s", 0.0)), int(req["timed_calls"]))
        last = timing.pop("last_outputs")
        cmp = compare(last["reference"], last["candidate"], atol, rtol)
        if not cmp["ok"]:
            return v.mismatch(f"last timed call: {cmp['message']}", cmp)
        # Judged on a contiguous window per implementation, not the sum of per-call samples: the
        # process CPU clock sees other threads' time only at scheduler ticks, so a 0.1 ms window
        # can be charged a whole tick (seen: "17.8 cores" on 2 cores for tiny calls).
        cores = cores_used([("reference", reference), ("candidate", candidate)], _inputs(problem, seed + 2000))
        timing["cores_used"] = cores
        cpu_bound = 1.5 * n_threads  # spinning OpenMP pools can add a little on top of n cores
        if cores["candidate"] > cpu_bound:
            return v.reject("thread_budget", f"the candidate used {cores['candidate']:.2f} cores of CPU time per "
                                             f"wall-clock second at num_threads={n_threads} (reference "
                                             f"{cores['reference']:.2f})")
        v.note("thread_budget", "pass", f"candidate used {cores['candidate']:.2f} cores per wall second "
                                        f"(bound {cpu_bound:.1f}; reference {cores['reference']:.2f})")

        announce(workdir, "recheck")
        if failure := guard_failure("after timing"):
            return failure
        inputs = _inputs(problem, int(req.get("holdout_seed", seed + 3000)))
        _, failure = trials.call(inputs, reference(*_clone(inputs)), "held-out inputs (after timing)")
        if failure:
            return failure
        if failure := guard_failure("after the held-out trial"):
            return failure
        for rule in ("no_monkeypatching", "fp_environment", "no_threads_or_processes", "no_reference_model"):
            v.note(rule, "pass", "runtime")
    return {"status": "ok", "message": "correct on all trials and on held-out inputs after timing",
            "max_abs_diff": trials.max_abs, "mean_abs_diff": trials.mean_abs, "checks": v.checks,
            "holdout_ok": True, "traffic_bytes": traffic_bytes, "num_threads": torch.get_num_threads(), **timing}


CORES_WINDOW_S = 0.2  # long against a scheduler tick (4-10 ms): the clock's lag is then <5%
CORES_MAX_CALLS = 10_000


def cores_used(impls: list[tuple[str, Callable]], inputs: list[Any],
               window_s: float = CORES_WINDOW_S) -> dict[str, float]:
    """Process CPU seconds per wall second while each implementation runs back to back for at
    least ``window_s`` (one call at least), on its own copy of the inputs."""
    ratio = {}
    for name, fn in impls:
        args = _clone(inputs)
        calls = 0
        c0, t0 = process_time_ns(), perf_counter_ns()
        while calls < 1 or (perf_counter_ns() - t0 < window_s * 1e9 and calls < CORES_MAX_CALLS):
            fn(*args)  # the output is dropped at once, as in timing
            calls += 1
        c1, t1 = process_time_ns(), perf_counter_ns()
        ratio[name] = round((c1 - c0) / (t1 - t0), 3) if t1 > t0 else 0.0
    return ratio


def time_interleaved(impls: list[tuple[str, Callable]], inputs: list[Any], warmup_calls: int,
                     warmup_s: float, timed: int) -> dict[str, Any]:
    """Time implementations in rotating order (A B C, B C A, C A B, ...) on the same inputs.

    Every implementation gets its own copy of the inputs and the same allocation policy: its
    output is dropped right after the call (the last round's outputs are kept for a check).
    Warm-up runs whole rounds until each implementation had ``warmup_calls`` calls and
    ``warmup_s`` seconds have passed (fresh processes need tens of calls before page faults and
    caches settle); timed rounds record wall and process-CPU time per call.
    """
    args = {name: _clone(inputs) for name, _ in impls}
    k = len(impls)
    start = perf_counter_ns()
    rounds = 0
    while rounds < warmup_calls or ((perf_counter_ns() - start) / 1e9 < warmup_s and rounds < WARMUP_MAX_ROUNDS):
        for name, fn in impls[rounds % k:] + impls[:rounds % k]:
            fn(*args[name])
        rounds += 1
    warmup_elapsed_s = (perf_counter_ns() - start) / 1e9
    wall: dict[str, list[float]] = {name: [] for name, _ in impls}
    cpu: dict[str, list[float]] = {name: [] for name, _ in impls}
    last: dict[str, Any] = {}
    for i in range(timed):
        for name, fn in impls[i % k:] + impls[:i % k]:
            c0 = process_time_ns()
            t0 = perf_counter_ns()
            out = fn(*args[name])
            t1 = perf_counter_ns()
            c1 = process_time_ns()
            wall[name].append((t1 - t0) / 1e6)
            cpu[name].append((c1 - c0) / 1e6)
            if i == timed - 1:
                last[name] = out
            del out
    ratio = {name: (sum(cpu[name]) / sum(wall[name]) if sum(wall[name]) > 0 else 0.0) for name in wall}
    return {"samples_ms": wall, "cpu_ratio": ratio, "warmup_rounds": rounds,
            "warmup_elapsed_s": warmup_elapsed_s, "last_outputs": last}
