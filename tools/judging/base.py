"""What the judge's concerns share: the seeds (``Seeds``), a runner's input binding (``Binding``; here,
not in runners.py, which imports neighbours.py: every mixin can import this module) and the typed
state every mixin of ``session.Judge`` reads and writes (``JudgeState``).

``JudgeState`` is the contract between the mixins (``runners``, ``correctness``, ``audits``,
``timing``, ``neighbours``): each attribute is declared here with its type and what it holds, and
set by ``Judge.__init__`` (a few by the phase that owns them, said where). The methods one mixin
calls and another defines are declared for the type checker only (``if TYPE_CHECKING``), with the
defining mixin's signature; at run time the class holds no methods and no values, so ``Judge``'s
method resolution is that of its mixins alone.

Imports stay one-way: this module imports no mixin (each mixin imports it).

``make lint`` runs mypy without resolving ``pragma.*`` (the editable install is an import hook
mypy cannot follow), so there this class is ``Any`` to the mixins, and an attribute a mixin assigns
from its own value (``self.max_abs = max(self.max_abs, ...)``) or as an empty container repeats its
annotation at that line. Resolved (``MYPYPATH`` at a ``pragma/`` link tree of the folders), mypy
checks every use in the mixins against the declarations here, and each repeat against its own."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, TypedDict

import torch

from pragma.tools.judging import peek
from pragma.tools.judging.verdicts import Decided, Verdicts
from pragma.tools.launch import spawn
from pragma.tools.wire import shm
from pragma.tools.wire.verification import SandboxedRequest


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
        fresh: shm.Region | None = None  # the new region, made when the layout changed (not same)
        if not same:
            if self.region is not None and not self.shared:
                self.region.close()  # the shared region is the judge's to close
            self.shared = False
            fresh = self.region = shm.Region(size, name=f"pragma-in-{self.handle.role}")
            self.specs = specs
            self.views = list(inputs)
            for spec in specs:
                self.views[spec["index"]] = fresh.view(spec)
        for spec in specs:
            self.views[spec["index"]].copy_(inputs[spec["index"]])
        if fresh is not None:
            values = [None if isinstance(x, torch.Tensor) else x for x in inputs]
            self.handle.request({"op": "bind", "size_bytes": fresh.size_bytes, "specs": specs}, [fresh.fd], values)
        elif self.handle.extra.get("device", "cpu") != "cpu":
            self.handle.request({"op": "sync"})


# Per role, the spot read of its last timed call (audits.py): the output layout and the elements read
# at this round's positions; the read made ready (``peek.Prepared``) between the read inside the timed
# window and its unpacking after it; or why the output could not be read.
SpotRead: TypeAlias = tuple[list[peek.Where], list[torch.Tensor]] | peek.Prepared | str


class JudgeState:
    """The state of one verification, shared by the judge's concerns (the base of every mixin).

    Roles name runners: ``reference``, ``candidate``, ``best`` and the spares (``runners.TIMED_CANDIDATE``,
    ``runners.CONFIRM``). Times carry their unit in the name or the comment."""

    # --- the request and the runners (set by Judge.__init__; ``sched_expected`` by session.main) ------
    req: SandboxedRequest  # the typed request (tools/wire/verification.py)
    workdir: Path  # the verification's directory: candidate.py, best.py, progress.jsonl, result.json
    runners: dict[str, spawn.RunnerHandle]  # role -> its runner process (a replaced or failed one is popped)
    bindings: dict[str, Binding]  # role -> its input and output regions
    seeds: Seeds  # drawn after the fork; never written to the result
    isolation: dict[str, str]  # what confines what (filesystem, judge, runners): reported as ``isolation``
    # pid -> (nice, policy, cores) every task of that runner (and the judge's main thread) must keep:
    # what it had when forked, before any candidate code ran (session.main; _check_scheduling)
    sched_expected: dict[int, tuple[int, int, frozenset[int]]]

    # --- settings read from the request ------------------------------------------------------------
    atol: float  # absolute tolerance of the comparisons
    rtol: float  # relative tolerance of the comparisons
    bar: float  # the speedup over the best the CI's low end must clear (acceptance.bar)
    n_threads: int  # num_threads: torch threads in every runner, the candidate's core budget
    device: str  # "cpu" or "cuda"

    # --- the verdict and what the result reports ----------------------------------------------------
    v: Verdicts  # the ``checks`` list; ``reject``/``mismatch`` build the Decided that ends a verification
    phase: str  # the current phase (progress.jsonl; ``failed_phase`` of a Decided result)
    builds: list[dict[str, str]]  # the candidate's builds as its runner reported them (so_path, source_path, kind)
    best_error: str  # why the best could not be loaded or read, or disagreed ("" if it did not)
    extra: dict[str, Any]  # "devices" (role -> its output devices), "stress" (the stress report)
    max_abs: float  # the largest absolute difference to the reference over the trials
    mean_abs: float  # the largest mean absolute difference to the reference over the trials
    precise_info: dict[str, Any]  # float64 re-judgements: calls, accepted, s (seconds), affine, unavailable

    # --- the problem and correctness ----------------------------------------------------------------
    problem: Any  # the problem's module in the judge (KernelBench format: get_inputs, ...); None until load
    init_inputs: list[Any]  # get_init_inputs(), drawn under the construct seed
    ref_outs: list[Any]  # the reference's outputs of the correctness trials
    affine: list[bool] | None  # per output: is the reference affine in its inputs (_affine); None: not decided yet
    degenerate_first: str  # why the first trial alone cannot discriminate (decided with stress); "" if it can
    released: bool  # compiled-call counting (and the Triton launch hook) removed after the trials

    # --- timing -------------------------------------------------------------------------------------
    gen: torch.Generator  # per-round input changes (freshen), seeded with seeds["fresh"]
    audit_rng: random.SystemRandom  # which rounds are audited and recorded, the order within a round
    timed_runner: str  # which of the candidate's runners was timed (fresh_candidate)
    timed_region: tuple[shm.Region, list[shm.TensorSpec], list[Any]] | None  # the sealed inputs: region, specs, views
    stopped_early: str  # when and why the timed rounds ended before timed_calls ("" if not)
    warm_ms: list[float]  # the reference's warm-up call times (ms)

    # --- CPU accounting (/proc, neighbours.py) ------------------------------------------------------
    call_cpu: dict[str, tuple[int, int]]  # role -> (CPU ticks, wall ns) of its timed calls
    cores_from: dict[str, str]  # role -> what its cores_used was measured over
    call_cores_peak: float  # the candidate's most CPU per second of one timed call, in cores
    idle_ticks: dict[str, int]  # role -> CPU ticks while stopped for the others' calls (set by Timing.timing)
    stop_ticks: dict[str, int]  # role -> its CPU ticks when last stopped (set by Timing.timing)

    # --- spot reads inside the timed window (peek.py) and audits ------------------------------------
    spot_gen: torch.Generator  # this round's secret positions (seeded from the OS, not from ``seeds``)
    spot_unit: torch.Tensor | None  # this round's positions as fractions of each output's size; None: off
    spots: dict[str, SpotRead]  # role -> what its output held at the positions when its call returned
    spot_count: int  # elements per output; set from the reference's warm-up calls
    spot_layouts: dict[str, list[peek.Where]]  # role -> its last call's output layout
    spot_prep: dict[str, peek.Prepared]  # role -> this round's read, made ready
    spot_escalations: int  # rounds the spot reads sent to a full audit
    spot_ns: list[int]  # the judge's read inside each timed window (its cost, ns)
    audit_ns: list[int]  # each full audit, outside the timed windows (its cost, ns)

    if TYPE_CHECKING:
        # Methods one mixin calls and another defines (the definer in each comment). Declared for the
        # type checker only: mypy checks each definition against its declaration here.

        # runners.RunnerLifecycle
        def announce(self, phase: str) -> None: ...
        def ask(
            self, role: str, header: dict[str, Any], fds: list[int] | None = None, payload: Any = None
        ) -> dict[str, Any]: ...
        def _died(self, role: str) -> Decided: ...
        def _inputs(self, seed: int) -> list[Any]: ...
        def fetch(self, role: str, copy: bool = True, precise: bool = False) -> Any: ...
        def call(self, role: str, **flags: bool) -> dict[str, Any]: ...
        def guard(self, when: str) -> None: ...
        def call_failed(self, role: str, rep: dict[str, Any]) -> NoReturn: ...
        def _replace_runner(self, role: str, spare: str) -> None: ...

        # correctness.Correctness
        def _inputs_intact(self, role: str, masters: list[Any], label: str) -> None: ...
        def precise_compare(
            self, ref_out: Any, out: Any, atol: float, cmp: dict[str, Any], inputs: list[Any] | None = None
        ) -> dict[str, Any]: ...

        # audits.Audits
        def timed_call(self, role: str, record: bool = False) -> tuple[float, dict[str, Any]]: ...
        def _spot_check(self, roles: list[str], masters: list[Any], i: int) -> bool: ...
        def _spot_count(self) -> int: ...
        def _new_spots(self) -> None: ...
        def _draw(self, early: range, rounds: range, n_early: int, n: int) -> set[int]: ...
        def _audit(self, roles: list[str], masters: list[Any], i: int) -> None: ...

        # neighbours.Neighbours
        def _judge_call_cpu(self, pid: int, cpu0: int | None, may_run_ns: int) -> None: ...
        def _check_scheduling(self, when: str) -> None: ...
        def _judge_children(self, kids0: dict[int, int]) -> None: ...
        def _strays(self) -> dict[str, int]: ...
        def _neighbour_verdict(self, strays: dict[str, int], samples: dict[str, list[float]]) -> None: ...
        def cores_used(self, roles: list[str]) -> dict[str, float]: ...
