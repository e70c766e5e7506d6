"""The judge: decides a verification in a process that never imports candidate code.

Invoked by the sandbox as ``python -m pragma.tools.judge REQUEST.json`` (already confined: env
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

Writes ``result.json`` (a ``JudgeResult``) and ``progress.jsonl`` (phases, for the deadlines).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import math
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from time import perf_counter_ns
from typing import Any, TypedDict

import torch

from pragma.tools import acceptance, freshen, landlock, peek, shm, spawn, stats, stress, timing_slot
from pragma.tools import compare as cmp_mod
from pragma.tools.anticheat import RULES
from pragma.tools.wire.verification import SandboxedRequest

TIMED_CANDIDATE = "candidate_timed"  # the candidate's second runner, timed against the best
# A second pair, loaded beside the best too, times a would-be acceptance once more (Judge.confirm),
# unless the first pair's CI clears the bar by more than any per-process bias measured
# (acceptance.needs_confirmation).
CONFIRM = {"candidate": "candidate_confirm", "best": "best_confirm"}
SETTLE_S = 0.02  # the first trial waits this long before checking that the output stopped changing
WARMUP_MAX_ROUNDS = 10_000
WARMUP_WINDOW = 5  # calls per window of the settle test (two windows: 10 calls at least)
WARMUP_SETTLED = 0.03  # the two windows' medians within 3%: past the first calls' page faults
CORES_WINDOW_S = 0.2  # long against a scheduler tick (10 ms): the tick count's error is then <5%
# One timed call of the candidate may use num_threads cores for as long as it could run (from its
# SIGCONT to its stop), within these margins. Pinned, it cannot use more (tools/seccomp.py); the
# clock is the scheduler's, exact for a stopped process, so the margins are small.
CALL_CORES_SLACK = 1.02
CALL_CPU_SLACK_NS = 100_000
AUDIT_FRACTION = 0.05  # share of timed rounds whose outputs are fetched and compared (~45 ms each for 32 MB outputs)
# Full audits per batch, at least: a kernel wrong on a share f of its timed calls, on too few elements
# for the spot reads to see, escapes (1 - f) ** audits. Issue 33's target is <= 1% at f = 0.25:
# 0.75 ** 17 = 0.75% (16 would be 1.002%). With 6 audits it was 18%.
AUDIT_ESCAPE_SHARE = 0.25
MIN_AUDITS = 17
RECORD_FRACTION = 0.05  # share of timed rounds where the candidate's ops are recorded (samples dropped)
# The judge's torch threads outside the timed rounds (trials, stress variants, re-check): its copies
# and comparisons of 32 MB outputs ran on one core while the other idled (check phase 1.25 -> 1.07 s
# for the ReLU example). Back to num_threads for the timed rounds, whose audits run between calls.
JUDGE_CHECK_THREADS = max(1, min(2, len(os.sched_getaffinity(0))))
MIN_TIMED_ROUNDS = 30  # sampled rounds before timing may end early (timing_ci_pct)
STOP_CHECK_EVERY = 10  # sampled rounds between two looks at the CI (each look: a bootstrap, ~3-9 ms)
EXTRA_BATCHES_MAX = 2  # head-to-head CI straddling 1.0: at most this many more batches of rounds
NULL_ROUND_TRIPS = 30
_PR_SET_DUMPABLE = 4
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class Seeds(TypedDict):
    """Drawn from the OS after the runners were forked; never written to the result."""

    trials: list[int]  # one per correctness trial
    stateless: int  # the generator choosing which elements the stateless probe changes
    stress: int  # stress variants
    timing: int  # the timed inputs
    fresh: int  # the generator of per-call input changes (and audit choices)
    holdout: int  # the held-out re-check after timing
    construct: int  # torch.manual_seed before every constructor (weights match across implementations)
    problem_import: int  # torch.manual_seed before importing the problem (judge and reference runner)
    candidate_import: int  # torch.manual_seed before importing the candidate / best module


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


class Decided(Exception):
    """A verdict reached before the end: carries the result."""

    def __init__(self, result: dict[str, Any]):
        super().__init__(result.get("message", ""))
        self.result = result


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


def _announce(workdir: Path, phase: str) -> None:
    with open(workdir / "progress.jsonl", "a") as f:
        f.write(json.dumps({"phase": phase, "t": time.time()}) + "\n")


def _import_file(path: str, module_name: str):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _stat_fields(path: str) -> list[bytes]:
    """Fields of a /proc stat file after ``comm``: index 0 is field 3 (state) of proc(5)."""
    try:
        with open(path, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def cpu_ticks(pid: int) -> int:
    """utime + stime of every thread of ``pid``, live or exited, plus cutime + cstime: the CPU of
    the children it reaped (clock ticks; 0 when it is gone). A child that shares the runner's
    memory, computes part of a call on another core and is reaped before the call returns leaves
    its CPU only there (issue 33): it is the candidate's CPU like its threads'."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return sum(int(fields[i]) for i in (11, 12, 13, 14))
    except (IndexError, ValueError):
        return 0


def child_ticks(pid: int) -> int:
    """cutime + cstime of ``pid``: CPU of its children that ran and were reaped (clock ticks)."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return int(fields[13]) + int(fields[14])
    except (IndexError, ValueError):
        return 0


def cpu_clock_ns(pid: int) -> int | None:
    """CPU time of every thread of ``pid``, live or exited, in ns (its process CPU clock: the
    scheduler's own runtime, not ticks). Exact for a stopped process (every thread is off the CPU,
    so none has time pending); None when the clock cannot be read."""
    try:
        return time.clock_gettime_ns((~pid << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except OSError:
        return None


def _cpu_list(text: str) -> frozenset[int]:
    """``0-3,6`` (a Cpus_allowed_list) as a set of CPU numbers."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit():
            out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def sched_of(pid: int, tid: int | None = None) -> tuple[int, int, frozenset[int]] | None:
    """(nice, scheduling policy, allowed CPUs) of one task from /proc; None when it is gone."""
    base = f"/proc/{pid}" if tid is None else f"/proc/{pid}/task/{tid}"
    fields = _stat_fields(f"{base}/stat")
    try:
        nice, policy = int(fields[16]), int(fields[38])  # fields 19 and 41 of proc(5)
    except (IndexError, ValueError):
        return None
    cpus = _status_field_at(f"{base}/status", "Cpus_allowed_list")
    return nice, policy, _cpu_list(cpus)


def _status_field_at(path: str, name: str) -> str:
    try:
        with open(path) as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith(name + ":")), "")
    except OSError:
        return ""


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _status_field(pid: int, name: str) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith(name + ":")), "")
    except OSError:
        return ""


def children_of(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


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


class Binding:
    """One runner's input region (a copy of the judge's master inputs) and output region."""

    def __init__(self, handle: spawn.RunnerHandle):
        self.handle = handle
        self.region: shm.Region | None = None
        self.specs: list[shm.TensorSpec] = []
        self.views: list[Any] = []  # the runner's inputs as the judge sees them (views of shared memory)
        self.out_region: shm.Region | None = None
        self.shared = False  # bound to the timed rounds' region (read-only, every runner's)

    def share(self, region: shm.Region, specs: list[shm.TensorSpec], views: list[Any]) -> None:
        """Bind the runner to ``region`` (sealed; mapped read-only there); the judge writes it."""
        values = [None if isinstance(x, torch.Tensor) else x for x in views]
        self.handle.request(
            {"op": "bind", "size_bytes": region.size_bytes, "specs": specs, "read_only": True}, [region.fd], values
        )
        if self.region is not None and not self.shared:
            self.region.close()
        self.region, self.specs, self.views, self.shared = region, specs, views, True

    def write(self, inputs: list[Any]) -> None:
        """Put ``inputs`` in the runner's region (same buffers when the layout is unchanged)."""
        specs, size = shm.layout(inputs)
        same = (
            not self.shared
            and self.region is not None
            and [(s["shape"], s["stride"], s["dtype"]) for s in specs]
            == [(s["shape"], s["stride"], s["dtype"]) for s in self.specs]
            and [type(x) for x in inputs] == [type(x) for x in self.views]
            and all(a == b for a, b in zip(inputs, self.views, strict=True) if not isinstance(a, torch.Tensor))
        )
        if not same:
            if self.region is not None and not self.shared:
                self.region.close()  # the shared region is the judge's to close
            self.shared = False
            self.region = shm.Region(size, name=f"pragma-in-{self.handle.role}")
            self.specs = specs
            self.views = list(inputs)
            for spec in specs:
                self.views[spec["index"]] = self.region.view(spec)
        for spec in specs:
            self.views[spec["index"]].copy_(inputs[spec["index"]])
        if not same:
            values = [None if isinstance(x, torch.Tensor) else x for x in inputs]
            self.handle.request(
                {"op": "bind", "size_bytes": self.region.size_bytes, "specs": specs}, [self.region.fd], values
            )
        elif self.handle.extra.get("device", "cpu") != "cpu":
            self.handle.request({"op": "sync"})


class Judge:
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
        self.bar = acceptance.bar(float(req["acceptance_margin"]))  # the CI vs the best must clear it
        self.n_threads = int(req["num_threads"])
        self.device = str(req["device"])
        self.bindings = {role: Binding(h) for role, h in runners.items()}
        self.builds: list[dict[str, Any]] = []
        self.best_error = ""
        self.phase = "start"
        self.max_abs = self.mean_abs = 0.0
        self.problem: Any = None
        self.init_inputs: list[Any] = []
        self.gen = torch.Generator().manual_seed(seeds["fresh"])
        self.audit_rng = secrets.SystemRandom()
        self.extra: dict[str, Any] = {}
        self.call_cpu: dict[str, tuple[int, int]] = {}  # role -> (CPU ticks, wall ns) of its timed calls
        self.cores_from: dict[str, str] = {}  # role -> what its cores_used was measured over
        # pid -> (nice, policy, cores) every task of that runner (and the judge's main thread) must
        # keep: what it had when forked, before any candidate code ran (main; _check_scheduling)
        self.sched_expected: dict[int, tuple[int, int, frozenset[int]]] = {}
        self.call_cores_peak = 0.0  # the candidate's most CPU per second of one timed call, in cores
        self.released = False  # compiled-call counting (and the Triton launch hook) removed
        self.ref_outs: list[Any] = []  # the reference's outputs of the correctness trials
        self.stopped_early = ""  # when and why the timed rounds ended before timed_calls ("" if not)
        self.timed_runner = ""  # which of the candidate's runners was timed (fresh_candidate)
        self.timed_region: tuple[shm.Region, list[Any], list[Any]] | None = None  # the sealed inputs
        self.degenerate_first = ""  # why the first trial alone cannot discriminate (decided with stress)
        # Spot reads (peek.py): this round's positions, what each implementation's output held
        # there when its call returned (or why it could not be read), and how many rounds they sent
        # to a full audit.
        self.spot_gen = torch.Generator().manual_seed(secrets.randbits(63))
        self.spot_unit: torch.Tensor | None = None
        self.spots: dict[str, Any] = {}
        self.spot_escalations = 0
        self.spot_ns: list[int] = []  # the judge's read inside each timed window (its cost)
        self.audit_ns: list[int] = []  # each full audit, outside the timed windows (its cost)
        self.spot_count = peek.SPOT_MIN  # elements per output; set from the reference's warm-up calls
        self.warm_ms: list[float] = []  # the reference's warm-up call times (ms)
        self.spot_layouts: dict[str, list[peek.Where]] = {}  # role -> its last call's output layout
        self.spot_prep: dict[str, peek.Prepared] = {}  # role -> this round's read, made ready
        self.affine: list[bool] | None = None  # per output: is the reference affine in its inputs (_affine)
        self.precise_info: dict[str, Any] = {}  # float64 re-judgements: calls, accepted, seconds, affine

    # --- plumbing ---------------------------------------------------------------------------------

    def announce(self, phase: str) -> None:
        self.phase = phase
        _announce(self.workdir, phase)

    def ask(
        self, role: str, header: dict[str, Any], fds: list[int] | None = None, payload: Any = None
    ) -> dict[str, Any]:
        """A command to a runner; a dead runner or a malformed reply ends the verification."""
        h = self.runners[role]
        try:
            return h.request(header, fds, payload)
        except EOFError:
            raise self._died(role) from None
        except Exception as exc:  # ProtocolError and anything a hostile reply provokes
            raise Decided(
                {"status": "runtime_error", "message": f"the {role} process broke the protocol: {str(exc)[:300]}"}
            ) from None

    def _died(self, role: str) -> Decided:
        how = self.runners[role].reap()
        what = "candidate" if role == "candidate" else role
        hint = {
            "SIGKILL": f" (killed: out of memory? the address-space limit is {self.req['memory_limit_bytes']} bytes)",
            "SIGXCPU": " (CPU-time limit of the sandbox)",
        }.get(how, "")
        if how in ("SIGSEGV", "SIGBUS") and role in self.bindings and self.bindings[role].shared:
            hint = (
                " (while timed, the inputs are one read-only region shared by every implementation: "
                "a write into an input ends the process)"
            )
        return Decided(
            {
                "status": "runtime_error",
                "message": f"the {what} process died with {how} during phase '{self.phase}'{hint}",
            }
        )

    def _inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        inputs = list(self.problem.get_inputs())
        return inputs

    def fetch(self, role: str, copy: bool = True, precise: bool = False) -> Any:
        """The runner's last outputs, copied out of its output region into judge memory (``copy``
        false: views of the region, valid until the runner's next fetch; only for a stopped runner
        or one whose output is compared at once). ``precise``: the reference's last float64 output."""
        b = self.bindings[role]
        for _ in range(2):
            rep = self.ask(role, {"op": "fetch", "precise": precise})
            if rep.get("ok") is True:
                break
            need = rep.get("need_bytes")
            if type(need) is int and 0 < need <= int(self.req["memory_limit_bytes"]):
                if b.out_region is not None:
                    b.out_region.close()
                b.out_region = shm.Region(need * 2 if need < (1 << 28) else need, name=f"pragma-out-{role}")
                self.ask(role, {"op": "out_region", "size_bytes": b.out_region.size_bytes}, [b.out_region.fd])
                continue
            kinds = rep.get("kinds") if isinstance(rep.get("kinds"), list) else []
            bad = next(
                (f"output {i} is {str(k)[:40]}, expected a tensor" for i, k in enumerate(kinds) if k != "tensor"),
                f"outputs could not be read: {str(rep.get('error', ''))[:200]}",
            )
            raise (
                self.v.mismatch(f"{role}: {bad}", {})
                if role != "reference"
                else Decided({"status": "runtime_error", "message": f"reference outputs could not be read: {bad}"})
            )
        else:
            raise Decided({"status": "runtime_error", "message": f"{role} outputs could not be read"})
        specs = rep.get("outputs")
        if not isinstance(specs, list) or not 1 <= len(specs) <= 64:
            raise Decided({"status": "runtime_error", "message": f"{role}: malformed output list"})
        outs = []
        for i, spec in enumerate(specs):
            try:
                checked = shm.check_output_spec(spec, b.out_region.size_bytes, i)
            except ValueError as exc:
                raise Decided({"status": "runtime_error", "message": f"{role}: {exc}"}) from None
            view = b.out_region.view(checked)
            outs.append(view.clone() if copy else view)
        devices = rep.get("devices") if isinstance(rep.get("devices"), list) else []
        self.extra.setdefault("devices", {})[role] = [str(d)[:20] for d in devices]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def call(self, role: str, **flags: bool) -> dict[str, Any]:
        rep = self.ask(role, {"op": "call", **flags})
        if rep.get("ok") is not True:
            kind = rep.get("kind")
            text = str(rep.get("error", "forward failed"))[:3000]
            if role == "reference":
                raise Decided({"status": "runtime_error", "message": f"the reference failed: {text}"})
            if kind == "memory":
                self.v.note("memory_limit", "fail", text[:300])
                raise Decided(
                    {
                        "status": "runtime_error",
                        "message": f"memory limit exceeded "
                        f"({self.req['memory_limit_bytes']} bytes of address space per sandbox): {text}",
                        "log_tail": str(rep.get("log_tail", ""))[-4000:],
                    }
                )
            raise Decided(
                {"status": "runtime_error", "message": text, "log_tail": str(rep.get("log_tail", ""))[-4000:]}
            )
        return rep

    # --- loading ----------------------------------------------------------------------------------

    def load(self) -> None:
        self.announce("load_problem")
        torch.manual_seed(self.seeds["problem_import"])
        self.problem = _import_file(self.req["problem_path"], "pragma_problem")
        torch.manual_seed(self.seeds["construct"])
        self.init_inputs = list(self.problem.get_init_inputs())
        common = {
            "op": "load",
            "construct_seed": self.seeds["construct"],
            "device": self.device,
            "num_threads": self.n_threads,
            "problem_path": self.req["problem_path"],
            "backend": self.req["backend"],
        }
        rep = self.ask(
            "reference",
            {
                **common,
                "path": self.req["problem_path"],
                "module_name": "pragma_problem",
                "class_name": "Model",
                "import_seed": self.seeds["problem_import"],
            },
            payload=self.init_inputs,
        )
        if rep.get("ok") is not True:
            raise Decided(
                {"status": "runtime_error", "message": f"the reference failed to load: {str(rep.get('error'))[:2000]}"}
            )
        self.announce("build")
        self._load_impl("candidate", "candidate.py", common)
        if "best" in self.runners:
            self.announce("build_best")
            try:
                self._load_impl("best", "best.py", common)
            except Decided as d:  # the best passed before; if it fails now, say so and go on
                self.best_error = d.result.get("message", "")[:500]
                self.runners.pop("best").kill()
                self.bindings.pop("best")
        spares = {TIMED_CANDIDATE: "candidate.py", CONFIRM["candidate"]: "candidate.py", CONFIRM["best"]: "best.py"}
        for spare, filename in spares.items():
            if spare not in self.runners:
                continue
            if "best" in self.runners:
                self._load_impl(spare, filename, common)
            else:
                self.runners.pop(spare).kill()
                self.bindings.pop(spare)
        for h in self.runners.values():
            h.extra["device"] = self.device
        caps = _status_field(self.runners["candidate"].pid, "CapEff")
        filtered = _status_field(self.runners["candidate"].pid, "Seccomp") == "2"
        self.isolation["runners"] = (
            "own processes and process groups, forked before any seed existed; own Landlock domains "
            f"(no signals, ptrace or /proc/<pid>/mem of the judge or each other); capabilities {caps or 'unknown'}"
            + (" (none)" if caps.strip("0") == "" and caps else "")
            + (
                "; seccomp filter: flock refused (no lock of PRAGMA's can be held); no scheduling, "
                "signals or memory of other processes, no affinity change (tools/seccomp.py)"
                if filtered
                else "; no seccomp filter"
            )
            + "; stopped while others are timed"
        )

    def _load_impl(self, role: str, filename: str, common: dict[str, Any]) -> None:
        rep = self.ask(
            role,
            {
                **common,
                "path": str(self.workdir / filename),
                "module_name": f"pragma_{role}",
                "class_name": "ModelNew",
                "import_seed": self.seeds["candidate_import"],
            },
            payload=self.init_inputs,
        )
        builds = rep.get("builds")
        if role == "candidate" and isinstance(builds, list):
            self.builds = [
                {k: str(b.get(k, ""))[:500] for k in ("so_path", "source_path", "kind")}
                for b in builds[:8]
                if isinstance(b, dict)
            ]
        if rep.get("ok") is not True:
            status = "compile_error" if rep.get("kind") == "compile_error" else "runtime_error"
            result = {
                "status": status,
                "message": str(rep.get("error", "loading failed"))[:6000],
                "log_tail": str(rep.get("log_tail", ""))[-4000:],
                "failed_phase": self.phase,
            }
            if rep.get("kind") == "memory":
                self.v.note("memory_limit", "fail", result["message"][:300])
            raise Decided(result)

    # --- checks -----------------------------------------------------------------------------------

    def guard(self, when: str) -> None:
        """Process-level rules: the runner's own findings (advisory) and what /proc shows (not)."""
        allowance = 2 * (self.n_threads - 1)
        for role in ("candidate",):  # the best passed before: its quirks must not reject the candidate
            rep = self.ask(role, {"op": "guards", "thread_allowance": allowance})
            findings = rep.get("findings") if isinstance(rep.get("findings"), list) else []
            for f in findings[:1]:
                if isinstance(f, list) and len(f) == 2 and f[0] in RULES:
                    raise self.v.reject(str(f[0]), f"{role}, {when}: {str(f[1])[:300]}")
            pid = self.runners[role].pid
            if kids := children_of(pid):
                raise self.v.reject(
                    "no_threads_or_processes", f"{role}, {when}: {len(kids)} child process(es) alive (seen in /proc)"
                )
            grown = thread_count(pid) - thread_count(self.runners["reference"].pid)
            if grown > allowance:
                raise self.v.reject(
                    "thread_budget",
                    f"{role}, {when}: {grown} more OS threads than the reference's "
                    f"process (allowed {allowance} at num_threads={self.n_threads}; /proc)",
                )

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
            self.max_abs = max(self.max_abs, cmp.get("max_abs_diff", 0.0))
            self.mean_abs = max(self.mean_abs, cmp.get("mean_abs_diff", 0.0))
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
            self.affine = flags if flags is not None else []
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
        """The candidate on the stress variants of a fresh, unseen draw (tools/stress.py, issue 12)."""
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

    # --- timing -----------------------------------------------------------------------------------

    def timed_call(self, role: str, record: bool = False) -> tuple[float, dict[str, Any]]:
        """Judge's clock around one call's round trip (same protocol for every implementation).

        Candidate and best runners are continued just before and stopped just after their own
        call, outside the timed span; the CPU they accrue while stopped is tracked for
        ``noisy_neighbour``."""
        h = self.runners[role]
        stoppable = role != "reference"
        before = cpu_ticks(h.pid)
        judged = role == "candidate"  # the best passed before: its quirks must not reject the candidate
        cpu0 = cpu_clock_ns(h.pid) if judged else None
        may_run0 = perf_counter_ns()
        if stoppable:
            self.idle_ticks[role] += before - self.stop_ticks[role]
            h.cont()
        t0 = perf_counter_ns()
        rep = self.ask(role, {"op": "call", "record": record})
        if rep.get("ok") is True:
            self._spot_read(role, rep)  # inside the window: the call ends when its output exists
        t1 = perf_counter_ns()
        if rep.get("ok") is not True:
            self.call_failed(role, rep)
        if stoppable:
            if not h.stop():
                raise self._died(role)
        if judged:
            self._judge_call_cpu(h.pid, cpu0, perf_counter_ns() - may_run0)
        after = cpu_ticks(h.pid)
        if stoppable:
            self.stop_ticks[role] = after
        # CPU over wall time of the calls themselves (the thread budget, cores_used): a stopped
        # runner accrues nothing between its calls, so these ticks are its calls' and nothing else's.
        ticks, ns = self.call_cpu.get(role, (0, 0))
        self.call_cpu[role] = (ticks + after - before, ns + t1 - t0)
        if rep.get("ok") is True:
            self._spot_settle(role, rep)
        return (t1 - t0) / 1e6, rep

    def _spot_read(self, role: str, rep: dict[str, Any]) -> None:
        """``self.spot_count`` elements of each output at this round's secret positions, read by
        the judge from the runner's memory before the clock stops (nothing the runner runs is
        involved: a page it left unwritten or protected is read as it is, or not at all)."""
        if self.spot_unit is None:
            return
        t0 = perf_counter_ns()
        pid, out, prep = self.runners[role].pid, rep.get("out"), self.spot_prep.get(role)
        try:
            if prep is not None and peek.matches(prep, out):  # the layout of its last call: only the read here
                peek.read_prepared(pid, prep, out)
                self.spots[role] = prep  # validated and unpacked after the window (_spot_settle)
            else:
                where = peek.parse(out, int(self.req["memory_limit_bytes"]))
                self.spots[role] = (where, [peek.spot(pid, w, self.spot_unit) for w in where[: peek.MAX_OUTPUTS]])
                self.spot_layouts[role] = where
        except peek.Unreadable as exc:
            self.spots[role] = str(exc)
        self.spot_ns.append(perf_counter_ns() - t0)

    def _spot_settle(self, role: str, rep: dict[str, Any]) -> None:
        """After the window: a prepared read's report validated field by field, its elements unpacked."""
        got = self.spots.get(role)
        if isinstance(got, peek.Prepared):
            try:
                where = peek.parse(rep.get("out"), int(self.req["memory_limit_bytes"]))
                self.spots[role] = (where, peek.prepared_values(got))
                self.spot_layouts[role] = where
            except peek.Unreadable as exc:
                self.spots[role] = str(exc)

    def _spot_check(self, roles: list[str], masters: list[Any], i: int) -> bool:
        """After round ``i``: every implementation's spot-read elements against the reference's.

        Every timed call is checked this way, so a kernel wrong on some timed calls cannot hope
        that the wrong ones go unaudited. Elements outside the tolerance send the round to a full
        audit (``compare``), which alone decides: an honest kernel whose rounding lands one
        element outside the plain tolerance is not refused on a sample. Returns whether it did."""
        ref = self.spots.get("reference")
        if self.spot_unit is None or ref is None:
            return False
        if isinstance(ref, str):
            raise Decided({"status": "runtime_error", "message": f"the reference's output could not be read: {ref}"})
        call = f"timed call {i}" if i >= 0 else f"warm-up call {-i}"
        for role in roles[1:]:
            got = self.spots.get(role)
            if isinstance(got, str) or got is None:
                why = f"{call}: the judge could not read the output when the call returned: {got}"
                if role == "best":
                    self.best_error = self.best_error or f"the best's {why}"
                    continue
                raise self.v.reject("output_materialised", why)
            same = len(got[0]) == len(ref[0]) and all(
                a.shape == b.shape and a.dtype == b.dtype for a, b in zip(got[0], ref[0], strict=False)
            )
            close = same and all(
                bool(torch.isclose(c.double(), r.double(), self.rtol, self.atol, equal_nan=True).all())
                for c, r in zip(got[1], ref[1], strict=True)
            )
            if not close:
                self.spot_escalations += 1
                self._audit(roles, masters, i)
                return True
        return False

    def _judge_call_cpu(self, pid: int, cpu0: int | None, may_run_ns: int) -> None:
        """No share of any timed call on more than num_threads cores (``thread_budget``).

        Why per call: judged over a whole batch at 1.5 x num_threads (tick counts need slack), a
        helper thread that took a third of every call to another core kept the batch at ~1.4
        cores and gained up to 1.3x (issue 33). The candidate's runner is stopped before its call
        and after it, so its process CPU clock (live and exited threads, in ns) is exact at both
        reads and every ns of it fell between its SIGCONT and its stop: pinned to num_threads
        cores it cannot exceed num_threads x that span. Children are not in that clock: their CPU
        is judged over the timed rounds (``_judge_children``) and counted in ``cores_used``."""
        cpu1 = cpu_clock_ns(pid)
        if cpu0 is None or cpu1 is None or may_run_ns <= 0:
            return
        used_ns = cpu1 - cpu0
        cores = used_ns / may_run_ns
        self.call_cores_peak = max(self.call_cores_peak, cores)
        if used_ns > self.n_threads * may_run_ns * CALL_CORES_SLACK + CALL_CPU_SLACK_NS:
            raise self.v.reject(
                "thread_budget",
                f"a timed call of the candidate used {cores:.2f} cores at num_threads={self.n_threads}: "
                f"{used_ns / 1e6:.2f} ms of CPU in the {may_run_ns / 1e6:.2f} ms it could run "
                "(its process CPU clock, read while stopped): a thread or process on another core for part of a call",
            )

    def _check_scheduling(self, when: str) -> None:
        """Every task of every runner, and the judge's main thread, still has the nice value, policy
        and cores it was forked with (``fair_scheduling``): no process lowered another's priority or
        moved it. The candidate's filter refuses such calls (tools/seccomp.py); this reads the result
        from /proc, so it also holds where no filter applied (another architecture, no seccomp)."""
        who = {h.pid: f"the {role} runner" for role, h in self.runners.items()}
        who[os.getpid()] = "the judge"
        for pid, expected in self.sched_expected.items():
            if pid not in who:
                continue  # a runner replaced since (killed)
            tids = [None] if pid == os.getpid() else [int(t) for t in _listdir(f"/proc/{pid}/task")]
            for tid in tids:
                now = sched_of(pid, tid)
                if now is None or now == expected:
                    continue
                raise self.v.reject(
                    "fair_scheduling",
                    f"{when}: {who[pid]} (task {tid or pid}) runs at nice {now[0]}, policy {now[1]}, cores "
                    f"{sorted(now[2])}; forked with nice {expected[0]}, policy {expected[1]}, cores "
                    f"{sorted(expected[2])} (/proc): its scheduling was changed",
                )

    def _judge_children(self, kids0: dict[int, int]) -> None:
        """Children of the candidate's runner that ran and were reaped during the timed rounds
        (cutime + cstime grew) reject it: a child sharing the runner's memory computed part of a
        call where no thread count or live-process check sees it (issue 33)."""
        pid = self.runners["candidate"].pid
        now = child_ticks(pid)
        grown = now - kids0.get(pid, now)
        if grown > 0:
            raise self.v.reject(
                "no_threads_or_processes",
                f"candidate: child processes ran during the timed rounds and were reaped before any check "
                f"({grown / _CLK_TCK * 1e3:.0f} ms of CPU in its cutime/cstime, /proc)",
            )

    def call_failed(self, role: str, rep: dict[str, Any]) -> None:
        text = str(rep.get("error", "forward failed"))[:3000]
        if role == "reference":
            raise Decided({"status": "runtime_error", "message": f"the reference failed while timed: {text}"})
        raise Decided({"status": "runtime_error", "message": f"{role} failed during timing: {text}"})

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

    def _replace_runner(self, role: str, spare: str) -> None:
        """``spare`` (forked at the start, loaded beside the best) becomes ``role``'s runner; the old one is killed."""
        self.runners.pop(role).kill()
        self.runners[role] = self.runners.pop(spare)
        self.bindings[role] = self.bindings.pop(spare)
        self.runners[role].cont()  # a confirmation spare waited stopped
        self.ask(role, {"op": "release"})  # as the first runner was released after its trials

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
        self.call_cpu = {}
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

    def _spot_count(self) -> int:
        """Spot elements per output worth ``peek.SPOT_BUDGET`` of the reference's median warm-up call
        (the read costs every implementation the same; kept small beside the call it closes)."""
        ref_ms = statistics.median(self.warm_ms) if self.warm_ms else 0.0
        n = int(peek.SPOT_BUDGET * ref_ms * 1e3 / peek.SPOT_READ_US)
        return max(peek.SPOT_MIN, min(peek.SPOT_MAX, n))

    def _new_spots(self) -> None:
        """This round's secret spot positions (fractions of each output's size), host outputs only,
        and each implementation's read prepared for the layout its last call reported."""
        self.spots = {}
        self.spot_unit = (
            torch.rand(self.spot_count, dtype=torch.float64, generator=self.spot_gen) if self.device == "cpu" else None
        )
        self.spot_prep = (
            {role: peek.prepare_spot(layout, self.spot_unit) for role, layout in self.spot_layouts.items()}
            if self.spot_unit is not None
            else {}
        )

    def _draw(self, early: range, rounds: range, n_early: int, n: int) -> set[int]:
        """``n`` distinct rounds at random, ``n_early`` of them among ``early`` (secret to the runners)."""
        chosen = set(self.audit_rng.sample(early, min(len(early), n_early, n)))
        rest = [r for r in rounds if r not in chosen]
        return chosen | set(self.audit_rng.sample(rest, min(len(rest), n - len(chosen))))

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

    def _audit(self, roles: list[str], masters: list[Any], i: int) -> None:
        """Outputs of round ``i``, fetched after the fact, against the reference's on the same inputs."""
        t0 = time.perf_counter_ns()
        try:
            self._audit_round(roles, masters, i)
        finally:
            self.audit_ns.append(time.perf_counter_ns() - t0)

    def _audit_round(self, roles: list[str], masters: list[Any], i: int) -> None:
        ref_out = self.fetch("reference", copy=False)  # the reference runner is idle until the next call
        for role in roles[1:]:
            h = self.runners[role]
            got = self.spots.get(role)
            if isinstance(got, tuple):
                # Read by the judge from the stopped runner: no message and no SIGCONT, so an audited
                # call looks like every other timed call from inside the runner, even afterwards.
                try:
                    parts = [peek.full(h.pid, w) for w in got[0]]
                except peek.Unreadable as exc:
                    if role == "best":
                        self.best_error = self.best_error or f"the best's output of timed call {i} is unreadable: {exc}"
                        continue
                    raise self.v.reject("output_materialised", f"timed call {i}: output unreadable: {exc}") from None
                out = parts[0] if len(parts) == 1 else tuple(parts)
            else:  # no host address (a GPU output): the runner copies it out on request
                self.idle_ticks[role] += cpu_ticks(h.pid) - self.stop_ticks[role]
                h.cont()
                try:
                    out = self.fetch(role, copy=False)  # compared below while the runner is stopped
                finally:
                    if not h.stop():
                        raise self._died(role)
                    self.stop_ticks[role] = cpu_ticks(h.pid)
            cmp = cmp_mod.compare(ref_out, out, self.atol, self.rtol)
            if not cmp["ok"]:  # the reference still holds this round's inputs; its view is cloned
                # first, because the float64 output is fetched into the same region
                ref_out = tuple(t.clone() for t in cmp_mod.tensors_of(ref_out))
                ref_out = ref_out[0] if len(ref_out) == 1 else ref_out
                cmp = self.precise_compare(ref_out, out, self.atol, cmp)
            if role == "best":  # reported, never held against the candidate
                if not cmp["ok"]:
                    self.best_error = f"the best disagreed with the reference on timed call {i}: {cmp['message']}"
                continue
            self._inputs_intact(role, masters, f"timed call {i} ({role})")
            if not cmp["ok"]:
                raise self.v.reject(
                    "audited_calls", f"timed call {i} (inputs changed since the last call): {cmp['message']}"
                )

    def _strays(self) -> dict[str, int]:
        """``"pid (comm)"`` -> CPU ticks, for processes in the sandbox that are neither the judge nor a runner."""
        known = {os.getpid(), *(h.pid for h in self.runners.values())}
        pids: set[int] = set(children_of(os.getpid()))  # a runner's child cloned with CLONE_PARENT is the judge's
        for h in self.runners.values():
            pids.update(children_of(h.pid))
        if self.req["fresh_proc"]:  # own PID namespace and /proc: pid 1 is the sandbox's init
            pids.update(p for p in children_of(1) if p not in known)
        out = {f"{p} ({_status_field(p, 'Name')})": cpu_ticks(p) for p in pids - known}
        if self.req["fresh_proc"]:  # orphans (their parent exited first) are reaped by init: its cutime
            out["1 (init: orphans it reaped)"] = child_ticks(1)
        return out

    def _neighbour_verdict(self, strays: dict[str, int], samples: dict[str, list[float]]) -> None:
        stray_ticks = sum(strays.values())
        others_ms = sum(sum(v) for k, v in samples.items() if k == "reference")
        limit_ticks = max(2, math.ceil(others_ms / 1e3 * _CLK_TCK * 0.01))
        for role, ticks in self.idle_ticks.items():
            if ticks > limit_ticks:
                raise self.v.reject(
                    "noisy_neighbour",
                    f"the {role} process used {ticks / _CLK_TCK * 1e3:.0f} ms of CPU "
                    "while stopped for the other implementations' calls",
                )
        if stray_ticks > limit_ticks:
            raise self.v.reject(
                "noisy_neighbour",
                f"processes outside the runners used {stray_ticks / _CLK_TCK * 1e3:.0f}"
                " ms of CPU during the timed rounds: "
                + ", ".join(
                    f"{k} {t / _CLK_TCK * 1e3:.0f} ms" for k, t in sorted(strays.items(), key=lambda kv: -kv[1])[:5]
                ),
            )
        self.v.note(
            "noisy_neighbour",
            "pass",
            f"stopped while others ran: {sum(self.idle_ticks.values())} ticks "
            f"(limit {limit_ticks}); other processes {stray_ticks} ticks (/proc)",
        )

    def cores_used(self, roles: list[str]) -> dict[str, float]:
        """CPU seconds per wall second of each runner (from /proc): over its timed calls when they
        add up to CORES_WINDOW_S (the calls that decide the speedup, no extra time), else over a
        back-to-back window of calls (short kernels: too few scheduler ticks in the timed calls)."""
        out = {}
        for role in roles:
            ticks, ns = self.call_cpu.get(role, (0, 0))
            # The reference's figure is only shown beside the candidate's (the budget is the
            # candidate's): its timed calls suffice, however short, and save a window per verification.
            if ns >= CORES_WINDOW_S * 1e9 or (role == "reference" and ns > 0):
                out[role] = round(ticks / _CLK_TCK / (ns / 1e9), 3)
                self.cores_from[role] = f"{ns / 1e9:.2f} s of timed calls"
                continue
            self.cores_from[role] = f"a {CORES_WINDOW_S:.1f} s window of back-to-back calls"
            h = self.runners[role]
            if role != "reference":
                h.cont()
            c0, t0 = cpu_ticks(h.pid), perf_counter_ns()
            self.ask(role, {"op": "burst", "window_s": CORES_WINDOW_S})
            c1, t1 = cpu_ticks(h.pid), perf_counter_ns()
            if role != "reference":
                h.stop()
                self.stop_ticks[role] = cpu_ticks(h.pid)
            out[role] = round((c1 - c0) / _CLK_TCK / ((t1 - t0) / 1e9), 3) if t1 > t0 else 0.0
        return out

    # --- the whole verification -------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        # The whole verification shares the machine's slot: never beside another job's timed rounds
        # (its build, trials and stress variants stream whole inputs and outputs through the memory
        # the timed kernel reads, and take the other core), beside other jobs' verifications at
        # will; the timed rounds inside take the slot exclusively (tools/timing_slot.py).
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


def _nbytes(values: Any) -> int:
    return sum(t.numel() * t.element_size() for t in cmp_mod.tensors_of(values) if isinstance(t, torch.Tensor))


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
    # from here too; its candidate cannot change the set (tools/seccomp.py).
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


if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (torch's finalizers); nothing left to clean up
