"""The judge: decides a verification in a process that never imports candidate code.

Invoked by the sandbox as ``python -m pragma.tools.judging.judge REQUEST.json`` (already confined: env
allowlist, rlimits, namespaces). Order matters:

1. confine its own writes (Landlock), import torch;
2. fork the runners (``spawn.fork_runner``): reference, candidate, [best]. Nothing secret exists
   yet: the request file is deleted, no seed is drawn, the problem is not imported;
3. draw every seed from the OS (``secrets``): correctness, stress, timing and held-out inputs,
   the construct seed (same for reference and candidates, so weights match as KernelBench
   requires), and separate import seeds, none related to another;
4. ``PR_SET_DUMPABLE 0``: a same-uid process cannot read this one's memory through /proc or ptrace
   (the runners' own Landlock layers deny it too, even as root);
5. load: the problem in the judge (for ``get_inputs``) and in the reference runner (its ``Model``),
   the candidate (and best) in theirs;
6. check, time, recheck; every decision from data the judge owns: outputs read from shared memory
   after a separate ``fetch`` command, inputs compared in shared memory, time from its own clock
   around each call's round trip, CPU time and threads from ``/proc``.

Writes ``result.json`` (the judge's part of a ``VerifyResult``, tools/wire/verification.py) and
``progress.jsonl`` (phases, for the deadlines).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import secrets
from pathlib import Path
from typing import Any

import torch

from pragma.tools.judging import acceptance, freshen, peek
from pragma.tools.judging.audits import Audits
from pragma.tools.judging.base import Binding, Seeds, SpotRead
from pragma.tools.judging.correctness import JUDGE_CHECK_THREADS, Correctness
from pragma.tools.judging.neighbours import Neighbours, sched_of
from pragma.tools.judging.runners import CONFIRM, TIMED_CANDIDATE, RunnerLifecycle, _announce
from pragma.tools.judging.timing import Timing
from pragma.tools.judging.verdicts import Decided, Verdicts
from pragma.tools.launch import landlock, spawn, timing_slot
from pragma.tools.wire.verification import SandboxedRequest

_PR_SET_DUMPABLE = 4


def draw_seeds(trials: int) -> Seeds:
    def one() -> int:
        return secrets.randbelow(2**31 - 1)

    return Seeds(
        trials=[one() for _ in range(trials)],
        stateless=one(),
        stress=one(),
        timing=one(),
        fresh=one(),
        holdout=one(),
        construct=one(),
        problem_import=one(),
        candidate_import=one(),
    )


class Judge(Timing, Audits, Correctness, RunnerLifecycle, Neighbours):
    """One verification: the state every concern reads (declared in ``base.JudgeState``, with what
    each attribute holds; set here, in ``__init__``) and the order they run in (``run``). The
    concerns are mixins, one module each: ``runners.RunnerLifecycle`` (commands, loading, guards),
    ``correctness.Correctness`` (trials, stress), ``audits.Audits`` (one timed call, spot reads,
    audits), ``timing.Timing`` (warm-up, batches, early stop, confirmation) and
    ``neighbours.Neighbours`` (``/proc`` accounting, scheduling checks).

    The containers are annotated here as in ``JudgeState`` too: ``make lint``'s mypy does not resolve
    ``pragma.*`` imports (the editable install is an import hook), so there the mixins are ``Any``."""

    def __init__(
        self,
        req: SandboxedRequest,
        workdir: Path,
        runners: dict[str, spawn.RunnerHandle],
        seeds: Seeds,
        isolation: dict[str, str],
    ):
        self.req, self.workdir, self.runners, self.seeds = req, workdir, runners, seeds
        self.isolation = isolation
        self.v = Verdicts()
        self.atol, self.rtol = float(req["atol"]), float(req["rtol"])
        self.bar = acceptance.bar(float(req["acceptance_margin"]))
        self.n_threads = int(req["num_threads"])
        self.device = str(req["device"])
        self.bindings = {role: Binding(h) for role, h in runners.items()}
        self.builds: list[dict[str, str]] = []
        self.best_error = ""
        self.phase = "start"
        self.max_abs = self.mean_abs = 0.0
        self.problem = None
        self.init_inputs: list[Any] = []
        self.gen = torch.Generator().manual_seed(seeds["fresh"])
        self.audit_rng = secrets.SystemRandom()
        self.extra: dict[str, Any] = {}
        self.call_cpu: dict[str, tuple[int, int]] = {}
        self.cores_from: dict[str, str] = {}
        self.sched_expected: dict[int, tuple[int, int, frozenset[int]]] = {}  # filled by main, before run
        self.call_cores_peak = 0.0
        self.released = False
        self.ref_outs: list[Any] = []
        self.stopped_early = ""
        self.timed_runner = ""
        self.timed_region = None
        self.degenerate_first = ""
        self.spot_gen = torch.Generator().manual_seed(secrets.randbits(63))
        self.spot_unit = None
        self.spots: dict[str, SpotRead] = {}
        self.spot_escalations = 0
        self.spot_ns: list[int] = []
        self.audit_ns: list[int] = []
        self.spot_count = peek.SPOT_MIN
        self.warm_ms: list[float] = []
        self.spot_layouts: dict[str, list[peek.Where]] = {}
        self.spot_prep: dict[str, peek.Prepared] = {}
        self.affine = None
        self.precise_info: dict[str, Any] = {}

    # --- the whole verification -------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        # The whole verification shares the machine's slot: never beside another job's timed rounds
        # (its build, trials and stress variants stream whole inputs and outputs through the memory
        # the timed kernel reads, and take the other core), beside other jobs' verifications at
        # will; the timed rounds inside take the slot exclusively (tools/launch/timing_slot.py).
        with timing_slot.share("verification") as checks_slot:
            self.load()
            return self._checked_and_timed(checks_slot)

    def _checked_and_timed(self, checks_slot: timing_slot.SlotUse) -> dict[str, Any]:
        with torch.no_grad():
            traffic = self.correctness()
            timing = self.timing()
            cores = timing["cores_used"]
            bound = 1.5 * self.n_threads
            if cores["candidate"] > bound:
                raise self.v.reject(
                    "thread_budget",
                    f"the candidate used {cores['candidate']:.2f} cores of CPU time "
                    f"per wall-clock second at num_threads={self.n_threads} (reference "
                    f"{cores['reference']:.2f}; /proc, over {self.cores_from.get('candidate', '?')})",
                )
            self.v.note(
                "thread_budget",
                "pass",
                f"candidate used {cores['candidate']:.2f} cores per wall second "
                f"(bound {bound:.1f}; reference {cores['reference']:.2f}; /proc, over "
                f"{self.cores_from.get('candidate', '?')}); at most {self.call_cores_peak:.2f} cores "
                f"in any one timed call (bound {self.n_threads})",
            )
            self.v.note(
                "fair_scheduling",
                "pass",
                "every runner and the judge kept the nice value, policy and cores they were forked with (/proc)",
            )
            self.v.note(
                "audited_calls",
                "pass",
                f"{len(timing['audited_calls'])} timed calls compared after the fact; inputs: {timing['fresh_inputs']}",
            )
            self.announce("recheck")
            torch.set_num_threads(JUDGE_CHECK_THREADS)  # the timed rounds are over
            self.guard("after timing")
            masters = self._inputs(self.seeds["holdout"])
            ref_out = self.reference_output(masters)
            self.bindings["candidate"].write(masters)
            self.checked_call(masters, ref_out, "held-out inputs (after timing)")
            self.guard("after the held-out trial")
            for rule in ("no_monkeypatching", "fp_environment", "no_threads_or_processes", "no_reference_model"):
                self.v.note(rule, "pass", "runtime")
        return {
            "status": "ok",
            "message": "correct on all trials, on audited timed calls and on held-out inputs after timing",
            "max_abs_diff": self.max_abs,
            "mean_abs_diff": self.mean_abs,
            "holdout_ok": True,
            "traffic_bytes": traffic,
            "num_threads": self.n_threads,
            "checks_slot_waited_s": checks_slot["waited_s"],
            **timing,
        }


def _writable(req: SandboxedRequest, workdir: Path) -> list[str]:
    writable = [str(workdir), *req["writable_paths"]]
    if req["device"] == "cuda":  # CUDA opens the GPU's device nodes read-write
        writable += landlock.device_writable("cuda")
    return writable


def main(request_path: str) -> int:
    req: SandboxedRequest = json.loads(Path(request_path).read_text())
    os.unlink(request_path)
    workdir = Path(req["workdir"])
    writable = _writable(req, workdir)
    # The timed rounds' input generator (native), built before Landlock confines this process and
    # before any runner exists (a no-op when the zygote built it already).
    freshen.prepare()
    isolation = {"filesystem": landlock.confine(landlock.for_children(writable))}
    torch.set_num_threads(int(req["num_threads"]))
    if req["backend"] == "gpu":
        import triton  # noqa: F401 - imported before the fork: runners then share its import cost

    spawn.prime_torch()  # torch's own lazy imports, before the fork (free when forked from the zygote)
    # The same cores for every runner (and the judge between calls): where the scheduler places a
    # process woken by a message (the reference) and one woken by SIGCONT (the candidate) would
    # otherwise differ, and on a loaded machine that difference lands in the speedup. Each runner
    # pins itself before anything else runs in it (no thread of it escapes the set), and is pinned
    # from here too; its candidate cannot change the set (tools/launch/seccomp.py).
    cores = sorted(os.sched_getaffinity(0))[: max(1, int(req["num_threads"]))]
    fork_runner = functools.partial(spawn.fork_runner, writable=writable, cores=cores)
    runners = {
        "reference": fork_runner("reference"),
        "candidate": fork_runner("candidate"),
    }
    if (workdir / "best.py").exists():
        runners["best"] = fork_runner("best")
        # The candidate is timed against the best in a runner whose history is the best's (loaded,
        # then warmed up and timed), not in the one that ran the correctness trials: see Judge.fresh_candidate.
        runners[TIMED_CANDIDATE] = fork_runner(TIMED_CANDIDATE)
        if req["device"] == "cpu":  # on a GPU each would hold a CUDA context of its own
            for spare in CONFIRM.values():
                runners[spare] = fork_runner(spare)
    # What every runner's tasks must keep (Judge._check_scheduling): the judge's nice and policy,
    # which a fork inherits, and the pinned cores where pinning worked (else the judge's own set).
    nice, policy, own_cores = sched_of(os.getpid()) or (0, 0, frozenset(os.sched_getaffinity(0)))
    sched_expected = {os.getpid(): (nice, policy, own_cores)}
    for h in runners.values():
        try:
            os.sched_setaffinity(h.pid, cores)
            sched_expected[h.pid] = (nice, policy, frozenset(cores))
        except OSError:
            sched_expected[h.pid] = (nice, policy, own_cores)
    # The judge keeps its heap like the runners (after their fork: they set their own): its copies
    # and comparisons of 32 MB outputs reuse pages instead of faulting in fresh ones (14 -> 7 ms a copy).
    spawn.steady_heap(ctypes.CDLL(None))
    seeds = draw_seeds(int(req["correctness_trials"]))
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    isolation["judge"] = (
        "separate process: seeds drawn after the runners were forked, not dumpable; "
        "runners in their own Landlock domains and process groups"
    )
    judge = Judge(req, workdir, runners, seeds, isolation)
    judge.sched_expected = sched_expected
    try:
        result = judge.run()
    except Decided as d:
        result = {**d.result, "failed_phase": judge.phase}
    except Exception as exc:  # a judge bug is a result too (never a silent ok)
        import traceback

        result = {
            "status": "runtime_error",
            "message": f"verifier error: {type(exc).__name__}: {exc}"[:2000],
            "log_tail": traceback.format_exc()[-3000:],
            "failed_phase": judge.phase,
        }
    finally:
        for h in runners.values():
            h.kill()
    result["checks"] = judge.v.checks
    result["builds"] = judge.builds
    result["isolation"] = isolation
    if judge.extra.get("stress"):
        result["stress"] = judge.extra["stress"]
    if judge.precise_info:
        result["precise_reference"] = judge.precise_info
    if req["backend"] == "gpu":
        result["device"] = req["device_note"] or req["device"]
    if judge.best_error:
        result["best_error"] = judge.best_error
    _announce(workdir, "done")
    tmp = workdir / "result.json.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, workdir / "result.json")
    return 0
