"""Timing: warm-up, batches of interleaved rounds, fresh inputs before every round, early stop,
extra batches while the CI straddles the acceptance bar, and the confirmation in a second pair of
runners (the rule itself: tools/judging/acceptance.py)."""

from __future__ import annotations

import statistics
from time import perf_counter_ns
from typing import Any

import torch

from pragma.tools.judging import acceptance, freshen, stats
from pragma.tools.judging.audits import AUDIT_ESCAPE_SHARE, AUDIT_FRACTION, MIN_AUDITS, RECORD_FRACTION
from pragma.tools.judging.base import JudgeState
from pragma.tools.judging.neighbours import anon_huge_page_share, child_ticks, cpu_ticks
from pragma.tools.judging.runners import CONFIRM, TIMED_CANDIDATE
from pragma.tools.launch import timing_slot
from pragma.tools.wire import shm

WARMUP_MAX_ROUNDS = 10_000


WARMUP_WINDOW = 5  # calls per window of the settle test (two windows: 10 calls at least)


WARMUP_SETTLED = 0.03  # the two windows' medians within 3%: past the first calls' page faults


MIN_TIMED_ROUNDS = 30  # sampled rounds before timing may end early (timing_ci_pct)


STOP_CHECK_EVERY = 10  # sampled rounds between two looks at the CI (each look: a bootstrap, ~3-9 ms)


EXTRA_BATCHES_MAX = 2  # head-to-head CI straddling 1.0: at most this many more batches of rounds


NULL_ROUND_TRIPS = 30


def settled(call_ms: list[float]) -> bool:
    """Whether the last two windows of warm-up calls took the same time (medians within 3%).

    Why: a fresh runner's first calls pay page faults and the allocator's growth (the ReLU example
    needed 20-40 calls before every runner kept its heap; now its first call is at most ~30% slower
    and the next ones are steady). A fixed 0.5 s warm-up covered that for every kernel but cost
    0.5 s per verification, a sixth of the 3 s target (issue 11); ending once the time per call
    stops moving keeps the cover and drops the rest (10-20 rounds for ReLU). A kernel that keeps
    drifting warms up for ``warmup_s`` as before."""
    if len(call_ms) < 2 * WARMUP_WINDOW:
        return False
    last = statistics.median(call_ms[-WARMUP_WINDOW:])
    before = statistics.median(call_ms[-2 * WARMUP_WINDOW : -WARMUP_WINDOW])
    return before > 0 and abs(last - before) <= WARMUP_SETTLED * before


class Timing(JudgeState):
    """The timed phase of a verification (``timing``) and the confirmation (``confirm``). Mixed into
    ``session.Judge``; one timed call and its audits are ``audits.Audits``."""

    # --- timing -----------------------------------------------------------------------------------

    def null_round_trip_ms(self) -> float:
        samples = []
        for _ in range(NULL_ROUND_TRIPS):
            t0 = perf_counter_ns()
            self.ask("reference", {"op": "ping"})
            samples.append((perf_counter_ns() - t0) / 1e6)
        return statistics.median(samples)

    def fresh_candidate(self) -> None:
        """Time the candidate against the best in the runner loaded beside the best.

        Why: the runner that ran the correctness trials and stress variants has another history
        than the best's (its heap, the allocator's moving mmap threshold, pages it has touched),
        and an identical kernel, timed there against the best, read up to 1.17x of itself under
        load, mostly in the candidate's favour (3 of 10 crowned the copy). Loaded at the same time
        as the best and used only from here on, the two runners differ in nothing but the code.
        The held-out re-check after timing runs in this runner too: the timed process is the one
        whose answers are checked last."""
        if TIMED_CANDIDATE not in self.runners:
            self.timed_runner = "the runner of the correctness trials (no best to time beside)"
            return
        self.timed_runner = "a second runner, loaded beside the best (the correctness trials ran in another)"
        self._replace_runner("candidate", TIMED_CANDIDATE)
        self.guard("in the runner it is timed in")

    def timing(self) -> dict[str, Any]:
        self.announce("time")
        torch.set_num_threads(self.n_threads)
        self.fresh_candidate()
        roles = ["reference", "candidate"] + (["best"] if "best" in self.runners else [])
        masters = self._inputs(self.seeds["timing"])
        placement = self._bind_timed_inputs(roles, masters)
        flops = self.ask("reference", {"op": "flops"})
        # Every element new before every timed round (freshen.Refill), outside the timed calls.
        plans = freshen.Refill.build(masters, self._inputs, self.gen) if self.req["fresh_inputs"] else None
        fresh_mode = (
            "off (fresh_inputs=false)"
            if plans is None
            else (plans.describe() or "nothing can change (constant or non-tensor inputs)") + ", before every round"
        )
        self.idle_ticks = {r: 0 for r in roles if r != "reference"}
        self.stop_ticks = {}
        self.call_cpu: dict[str, tuple[int, int]] = {}
        for r in self.idle_ticks:
            self.runners[r].stop()
            self.stop_ticks[r] = cpu_ticks(self.runners[r].pid)
        timed = int(self.req["timed_calls"])
        spares = [self.runners[r] for r in CONFIRM.values() if r in self.runners]
        spare_ticks = {}
        for h in spares:  # idle until a confirmation: stopped, and their CPU counted like the others'
            h.stop()
            spare_ticks[h.pid] = cpu_ticks(h.pid)
        with timing_slot.hold("verifier") as slot:
            self._check_scheduling("before the timed rounds")
            kids0 = {h.pid: child_ticks(h.pid) for h in self.runners.values()}
            warm, warmup_elapsed_s = self._warm_up(roles, masters)
            self.spot_count = self._spot_count()
            null_ms = self.null_round_trip_ms()
            samples: dict[str, list[float]] = {r: [] for r in roles}
            audited: list[int] = []
            recorded: list[int] = []
            batches = 0
            decision_log: list[str] = []
            strays_before = self._strays()
            round_index = 0
            while True:
                # Alone (no best to beat), timing may end once the speedup is precise enough; against
                # a best every batch runs whole (the acceptance margins were calibrated on whole batches).
                stop_pct = float(self.req["timing_ci_pct"]) if "best" not in roles else 0.0
                round_index += self._run_batch(
                    roles, masters, plans, timed, round_index, samples, audited, recorded, stop_pct
                )
                if "best" not in roles or batches >= EXTRA_BATCHES_MAX:
                    break
                low, high = stats.ratio_ci(samples["best"], samples["candidate"])
                if acceptance.decided((low, high), self.bar):  # more rounds cannot change the decision
                    break
                decision_log.append(
                    f"after {round_index} rounds the CI vs the best [{low:.3f}, {high:.3f}] "
                    f"straddles {self.bar:.3f}: one more batch"
                )
                batches += 1
            confirmation = {}
            if "best" in roles and spares:
                low, _ = stats.ratio_ci(samples["best"], samples["candidate"])
                if acceptance.needs_confirmation(low, self.bar):
                    for h in spares:
                        self.idle_ticks["best"] += cpu_ticks(h.pid) - spare_ticks[h.pid]
                    confirmation = self.confirm(roles, masters, plans, timed, round_index, audited, recorded)
                    round_index += len(confirmation["samples_ms"]["candidate"])
            # Per process: ticks since the first snapshot (all of them for a process that appeared).
            stray = {k: t - strays_before.get(k, 0) for k, t in self._strays().items()}
            stray = {k: t for k, t in stray.items() if t > 0}
            self._check_scheduling("after the timed rounds")
            self._judge_children(kids0)
            cores = self.cores_used(["reference", "candidate"])
            huge = {r: anon_huge_page_share(self.runners[r].pid) for r in ("reference", "candidate")}
        for r in self.idle_ticks:
            self.runners[r].cont()
        self._neighbour_verdict(stray, samples)
        changed = False
        if batches and "best" in roles:
            low, high = stats.ratio_ci(samples["best"], samples["candidate"])
            changed = acceptance.decided((low, high), self.bar)  # the first batch alone could not decide
            decision_log.append(
                f"after {round_index} rounds: [{low:.3f}, {high:.3f}]"
                + (" - decided" if changed else f" - still straddles {self.bar:.3f}: not accepted")
            )
        return {
            "samples_ms": samples,
            "warmup_rounds": warm,
            "warmup_elapsed_s": warmup_elapsed_s,
            "cores_used": cores,
            "anon_huge_page_share": huge,
            "null_round_trip_ms": null_ms,
            "timing_slot_waited_s": slot["waited_s"],
            "audited_calls": sorted(audited),
            # What the audits bound: a kernel wrong on 25% of its timed calls, on elements the spot
            # reads miss, passes all of them with this probability (issue 33: target <= 1%).
            "audit_escape_at_quarter": (1.0 - AUDIT_ESCAPE_SHARE) ** len(set(audited)),
            "audit_ms_total": sum(self.audit_ns) / 1e6,
            "recorded_calls": sorted(recorded),
            "fresh_inputs": fresh_mode,
            "fresh_inputs_ms_per_round": statistics.median(plans.ms) if plans is not None and plans.ms else 0.0,
            "spot_reads": f"{self.spot_count} elements per output of every timed call, read by the judge "
            f"inside the timed window; {self.spot_escalations} round(s) sent to a full audit"
            if self.device == "cpu"
            else "off (device outputs: audited rounds are fetched by the runner)",
            "spot_read_ms_per_call": statistics.median(self.spot_ns) / 1e6 if self.spot_ns else 0.0,
            "input_placement": placement,
            "candidate_timed_in": self.timed_runner,
            "confirmation": confirmation,
            "extra_batches": batches,
            "sequential_log": decision_log,
            "timed_rounds_stop": self.stopped_early or f"all {len(samples['candidate'])} sampled rounds",
            "sequential_decision_changed": changed,
            "flops": int(flops.get("flops", 0)) if type(flops.get("flops")) is int else 0,
            "timing_method": "judge's perf_counter_ns around each call's round trip (null round trip "
            f"{null_ms * 1e3:.0f} us, the same for every implementation)",
        }

    def _warm_up(self, roles: list[str], masters: list[Any]) -> tuple[int, float]:
        """Whole rounds until every implementation had ``warmup_calls`` calls, then until its call
        times settled or ``warmup_s`` passed, whichever comes first (see ``settled``)."""
        t_start = perf_counter_ns()
        warm = 0
        times: dict[str, list[float]] = {r: [] for r in roles}
        while warm < WARMUP_MAX_ROUNDS and (
            warm < int(self.req["warmup_calls"])
            or (
                (perf_counter_ns() - t_start) / 1e9 < float(self.req["warmup_s"])
                and not all(settled(t) for t in times.values())
            )
        ):
            self._new_spots()
            for role in roles[warm % len(roles) :] + roles[: warm % len(roles)]:
                times[role].append(self.timed_call(role)[0])
            self.warm_ms = times["reference"]
            self._spot_check(roles, masters, -1 - warm)
            warm += 1
        return warm, (perf_counter_ns() - t_start) / 1e9

    def confirm(
        self,
        roles: list[str],
        masters: list[Any],
        plans: freshen.Refill | None,
        timed: int,
        first: int,
        audited: list[int],
        recorded: list[int],
    ) -> dict[str, Any]:
        """Time a would-be new best once more, in a second pair of runners (candidate and best).

        Why: a runner process carries a bias of its own that no pairing of rounds removes (where
        its heap, outputs and code sit in physical memory): an identical kernel, timed as
        candidate and as best, read 0.93x-1.09x of itself idle and up to 1.125x in a 2-worker eval,
        where 2 of 48 copies cleared the 8% margin. Two independent pairs must both clear it. The
        pair was forked with the others (before any seed) and loaded beside the best; it runs the
        same warm-up and one batch, and from here on it is the candidate and the best (the
        held-out re-check runs in this candidate runner)."""
        for role in ("candidate", "best"):
            self._replace_runner(role, CONFIRM[role])
            self._bind_timed(role, masters)
        self.guard("in the confirmation runner")
        for role in ("candidate", "best"):
            self.runners[role].stop()
            self.stop_ticks[role] = cpu_ticks(self.runners[role].pid)
        warm, _ = self._warm_up(roles, masters)
        samples: dict[str, list[float]] = {r: [] for r in roles}
        self._run_batch(roles, masters, plans, timed, first, samples, audited, recorded)
        low, high = stats.ratio_ci(samples["best"], samples["candidate"])
        return {
            "samples_ms": samples,
            "warmup_rounds": warm,
            "speedup_vs_best_ci": [low, high],
            "confirmed": acceptance.clears(low, self.bar),
        }

    def _run_batch(
        self,
        roles: list[str],
        masters: list[Any],
        plans: freshen.Refill | None,
        timed: int,
        first: int,
        samples: dict[str, list[float]],
        audited: list[int],
        recorded: list[int],
        stop_pct: float = 0.0,
    ) -> int:
        """``timed`` sampled rounds plus the recorded ones, from round ``first``; returns how many ran.

        ``stop_pct`` > 0: the batch ends early, after at least ``MIN_TIMED_ROUNDS`` sampled rounds
        (checked every ``STOP_CHECK_EVERY``), once the 95% CI of the speedup over the reference lies
        within +-``stop_pct`` percent of it (``self.stopped_early`` says when)."""
        k = len(roles)
        # Recorded rounds are extra rounds (the recording slows the call): ``timed`` samples remain.
        # Not with Triton: the launch hook that hides the interpreter's own aten plumbing from the
        # recorder is removed before timing (it would slow every timed launch).
        n_record = 0 if self.req["backend"] == "gpu" else max(1, round(timed * RECORD_FRACTION))
        rounds = range(first, first + timed + n_record)
        # A batch that may end early draws all its audits but one among the first MIN_TIMED_ROUNDS
        # rounds (the rest among all; the round it ends on is always audited): ending early must
        # not mean fewer audits (MIN_AUDITS says why 17). A batch shorter than that is audited whole.
        early = rounds[: min(len(rounds), MIN_TIMED_ROUNDS)] if stop_pct > 0 else rounds
        n_audit = min(len(rounds), max(MIN_AUDITS, round(timed * AUDIT_FRACTION)))
        audit_set = self._draw(early, rounds, n_audit - 1, n_audit)
        record_set = self._draw(early, rounds, 1, n_record) if n_record else set()
        fresh = bool(self.req["fresh_inputs"])
        n_sampled = 0
        for i in rounds:
            if fresh:  # round 0 too: the warm-up rounds saw the first inputs
                self._freshen(roles, masters, plans, i)
            self._new_spots()
            round_ms: dict[str, float] = {}
            record = i in record_set
            # A fresh random order every round: with a fixed rotation one implementation follows a
            # given other more often than the rest, and who ran just before (its spinning threads,
            # the caches it left) showed up as a few percent, always in the same direction, under load.
            for role in self.audit_rng.sample(roles, k):
                ms, rep = self.timed_call(role, record=record and role != "reference")
                round_ms[role] = ms
                if record and role != "reference":
                    ops = rep.get("compute_ops") if isinstance(rep.get("compute_ops"), list) else []
                    if ops:
                        raise self.v.reject(
                            "no_torch_compute",
                            f"timed call {i} ({role}): forward dispatched "
                            f"torch compute ops: {', '.join(str(o)[:60] for o in ops[:8])}",
                        )
            if record:
                recorded.append(i)  # slowed by the recording: not a timing sample
            else:
                n_sampled += 1
                for role, ms in round_ms.items():
                    samples[role].append(ms)
            escalated = self._spot_check(roles, masters, i)  # every round, audited in full or not
            last = i == rounds[-1] or (not record and self._precise_enough(samples, n_sampled, stop_pct))
            if (i in audit_set or last) and not escalated:  # the last call of every batch is audited too
                self._audit(roles, masters, i)
            if i in audit_set or last or escalated:
                audited.append(i)
            if last:
                return i - first + 1
        return len(rounds)

    def _precise_enough(self, samples: dict[str, list[float]], n_sampled: int, stop_pct: float) -> bool:
        """Whether the timed rounds can end here: the speedup's 95% CI within +-``stop_pct``%.

        Why: 100 rounds of the ReLU example take 1.2 s on a 2-core AVX2 EPYC (two 6 ms calls per
        round) and its CI is within +-1.5% after 30-100 of them (50 typical); a noisier machine
        keeps timing up to ``timed_calls``. The rule looks at the CI's width only, never at where
        the speedup lies."""
        if stop_pct <= 0 or n_sampled < MIN_TIMED_ROUNDS or n_sampled % STOP_CHECK_EVERY:
            return False
        low, high = stats.ratio_ci(samples["reference"], samples["candidate"])
        mid = stats.paired_speedup(samples["reference"], samples["candidate"])
        if mid <= 0 or (high - low) / 2 > stop_pct / 100 * mid:
            return False
        self.stopped_early = (
            f"after {n_sampled} sampled rounds: the speedup's 95% CI [{low:.3f}, {high:.3f}] lies within "
            f"+-{stop_pct:g}% of {mid:.3f}"
        )
        return True

    def _bind_timed_inputs(self, roles: list[str], masters: list[Any]) -> str:
        """Bind every runner to one sealed input region for the timed rounds; says how inputs were placed.

        Why one region: an identical kernel timed in two runners read up to 14% apart, run after
        run, because each runner read its own copy of the inputs and where those pages sit in
        physical memory (host backing, cache sets) differs per copy: the best or the candidate
        was crowned by its inputs' placement. Read from the same pages, the two read within a
        few percent. Sharing is safe only if no runner can write: the region is sealed before any
        runner maps it (read-only), so a write through it faults and ends that runner."""
        specs, size = shm.layout(masters)
        region = shm.Region(size, name="pragma-in-timed")
        views = list(masters)
        for spec in specs:
            views[spec["index"]] = region.view(spec)
            views[spec["index"]].copy_(masters[spec["index"]])
        refused = region.seal_writes() if specs else "no tensor inputs"
        if refused:
            region.close()
        else:
            self.timed_region = (region, specs, views)
        for role in roles:
            self._bind_timed(role, masters)
        if refused:
            return f"one copy per implementation ({refused})"
        return "one sealed region, mapped read-only by every implementation (the same physical pages)"

    def _bind_timed(self, role: str, masters: list[Any]) -> None:
        """``role``'s runner onto the timed inputs: the sealed region, or its own copy where sealing was refused."""
        if self.timed_region is not None:
            self.bindings[role].share(*self.timed_region)
        else:
            self.bindings[role].write(masters)

    def _freshen(self, roles: list[str], masters: list[Any], plans: freshen.Refill | None, i: int) -> None:
        """New values for every element that can change, in every runner's inputs, before round ``i``."""
        if plans is None:
            return
        # Each distinct input region once: the shared one is every runner's.
        targets = list({id(self.bindings[r].views): self.bindings[r] for r in roles}.values())
        if all(b.shared for b in targets):
            # Written through the judge's own mapping of the sealed region; no runner can write it,
            # so the masters may be those very views (no second 32 MB copy per round).
            views = targets[0].views
            plans.next(views)
            for j, v in enumerate(views):
                if isinstance(v, torch.Tensor):
                    masters[j] = v
        else:
            plans.next(masters)
            for b in targets:
                if b.shared:
                    for spec in b.specs:
                        b.views[spec["index"]].copy_(masters[spec["index"]])
                else:
                    b.write(masters)  # syncs a device copy itself
        if self.device != "cpu" and any(b.shared for b in targets):
            for role in roles:
                self.ask(role, {"op": "sync"})
