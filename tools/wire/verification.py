"""The outer wire of the verifier: the request the judge reads and the result it writes.

``verify.request_for`` builds a whole ``VerifyRequest`` from ``Context`` (the defaults live there
only); the sandbox adds the ``SandboxedRequest`` fields; the judge reads every field by key, with
no default of its own. ``verify.empty_result`` is the whole ``VerifyResult`` with nothing measured,
which every outcome (static rejection, crash, timeout, verdict) fills in; it lands in
``PragmaState.verification``. JSON-native values only: it is written to disk and checkpointed.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Mode = Literal["verify", "profile", "build", "probe"]
Status = Literal["ok", "compile_error", "runtime_error", "mismatch", "timeout", "rejected"]


class VerifyRequest(TypedDict):
    """What a sandboxed verifier process is asked to do, built from ``Context`` by
    ``verify.request_for``. Profile and build requests extend it with keys of their own."""

    mode: Mode
    """Which process the sandbox starts: ``verify`` the judge; ``profile``, ``build``, ``probe``
    the worker (``sandbox.run_worker``)."""
    backend: str
    """``cpu`` (C++ kernels) or ``gpu`` (Triton kernels): ``Context.backend``."""
    problem_path: str
    """Absolute path of the KernelBench-format problem (the sandbox runs in its own directory)."""
    seed: int
    """Base seed for the problem's weights (``get_init_inputs``); the judge draws the input seeds
    itself, after forking the runners, so none travels here."""
    num_threads: int
    """Threads for reference and candidate alike (torch and OpenMP), and the cores they are pinned to."""
    atol: float
    """Absolute tolerance of the correctness comparison."""
    rtol: float
    """Relative tolerance of the correctness comparison."""
    correctness_trials: int
    """Fresh seeded inputs the candidate must match before it is timed."""
    warmup_calls: int
    """Untimed calls per implementation before the timed rounds (at least)."""
    warmup_s: float
    """Longest warm-up past ``warmup_calls``, seconds: rounds go on until every implementation's call
    time settled or this much time passed."""
    timed_calls: int
    """Sampled timed rounds per batch (each implementation once per round, interleaved)."""
    timing_ci_pct: float
    """With no best to beat, a batch may end after 30 rounds once the 95% CI of the speedup lies
    within +-this percent of it; 0 runs every round."""
    profile_calls: int
    """Kernel calls inside a profiled region (profile mode)."""
    fresh_inputs: bool
    """Change random input elements before every timed round (outside the timed calls)."""
    acceptance_margin: float
    """The CI of the speedup over the best must lie above 1 + this (tools/judging/acceptance.py)."""
    device: str
    """Where the tensors live: ``cpu`` or ``cuda`` (``device.device_for``)."""
    device_note: str
    """The device in words for a GPU-backend result (the CUDA device's name, or that the Triton
    interpreter ran on the CPU); empty on the CPU backend."""


class SandboxedRequest(VerifyRequest):
    """The request as the process inside reads it: the sandbox's own fields added."""

    workdir: str
    """The sandbox's private working directory (candidate files, progress, result)."""
    memory_limit_bytes: int
    """Address-space limit of every process in the sandbox, bytes (RLIM_INFINITY on CUDA)."""
    writable_paths: list[str]
    """Directories besides ``workdir`` the processes may write (Landlock): the build caches."""
    fresh_proc: bool
    """The sandbox has its own PID namespace and /proc, so stray processes are the sandbox's own."""


class Check(TypedDict):
    """One rule's verdict (tools/anticheat.RULES names every rule)."""

    rule: str
    """The rule's name."""
    verdict: str
    """``pass``, ``fail``, ``warn`` or ``skip``; the first ``fail`` decides the status."""
    detail: str
    """What was measured or seen, in one line (at most 500 characters)."""


class VerifyResult(TypedDict):
    """The verifier's total result: every field always present, numbers finite (0.0 when not
    measured), never None or inf (``verify._finite``)."""

    status: Status
    """The verdict; only ``ok`` can become a best."""
    message: str
    """One line (or a few) a person or the repair prompt reads: why it failed, or the speedup."""
    log_tail: str
    """The end of the sandbox's output (compiler errors, tracebacks)."""
    speedup: float
    """Median of the per-round ratios reference time / candidate time (paired rounds)."""
    speedup_ci: list[float]
    """[low, high]: 95% bootstrap CI of ``speedup``."""
    runtime_ms: float
    """Median timed call of the candidate, milliseconds."""
    ref_runtime_ms: float
    """Median timed call of the reference, milliseconds."""
    runtime_min_ms: float
    """Fastest timed call of the candidate, milliseconds."""
    ref_runtime_min_ms: float
    """Fastest timed call of the reference, milliseconds (the memory-roof check's reference point)."""
    max_abs_diff: float
    """Largest absolute difference from the reference over the comparisons made."""
    mean_abs_diff: float
    """Mean absolute difference from the reference over the comparisons made."""
    num_threads: int
    """Threads the candidate and reference were timed with (0 when nothing was timed)."""
    checks: list[Check]
    """Every rule's verdict, static rules first, in the order they were decided."""
    samples_ms: dict[str, list[float]]
    """Timed calls per implementation (``reference``, ``candidate``, ``best`` when timed), ms."""
    sandbox: dict[str, str]
    """The isolation layers that applied, by layer (network, filesystem, processes, judge, ...)."""
    wall_s: float
    """Wall-clock seconds of the whole verification."""
    builds: list[dict[str, Any]]
    """Each implementation's build: what was compiled or loaded, how long it took, cache hits."""
    phases_s: dict[str, float]
    """Seconds per phase (static checks, build, check, time, recheck, statistics)."""
    is_suspicious: bool
    """Faster than the machine's memory or compute roof allows (``speedup_plausible``)."""
    traffic_bytes: int
    """Bytes the problem's inputs and outputs occupy: the least memory traffic one call needs."""
    bandwidth_bytes_per_s: float
    """The bandwidth the memory-roof check assumed, bytes per second."""
    min_time_bound_ms: float
    """The least time one call can take by the memory roof, milliseconds."""
    holdout_ok: bool
    """The candidate matched the reference on held-out inputs drawn after timing."""
    is_new_best: bool
    """The acceptance decision (tools/judging/acceptance.py)."""
    acceptance: str
    """The decision's reason in one line."""
    best_runtime_ms: float
    """Median timed call of the best, timed in the same session, milliseconds (0.0: no best)."""
    speedup_vs_best: float
    """Median per-round ratio best time / candidate time."""
    speedup_vs_best_ci: list[float]
    """[low, high]: 95% bootstrap CI of ``speedup_vs_best``; its low end meets the acceptance bar."""
    speedup_of_minimums: float
    """Fastest reference call over fastest candidate call (a second reading of the speedup)."""
    cpu_ratio: dict[str, float]
    """Always empty: the current judge does not fill it (``cores_used`` carries its figures); kept
    so readers of older results find the key."""
    warmup_rounds: int
    """Untimed rounds run before the timed ones."""
    warmup_elapsed_s: float
    """Seconds the warm-up took."""
    null_round_trip_ms: float
    """A call that does nothing, judge to runner and back, milliseconds: the floor of every timed call."""
    timing_slot_waited_s: float
    """Seconds the judge waited for the machine's exclusive timing slot."""
    checks_slot_waited_s: float
    """Seconds the judge waited for the shared slot before its checks."""
    audited_calls: list[int]
    """Indices of the timed rounds whose whole outputs were compared after the call."""
    anon_huge_page_share: dict[str, float]
    """Per runner role (reference, candidate): the share of its resident anonymous memory (heap and
    unnamed mappings, where outputs live) on transparent huge pages after the timed rounds; -1.0
    when /proc could not say. A diagnostic of per-process timing bias, never judged."""
    audit_escape_at_quarter: float
    """Probability that a kernel wrong on 25% of timed calls passes every audit (1.0: none ran)."""
    audit_ms_total: float
    """Milliseconds spent on the audits."""
    recorded_calls: list[int]
    """Indices of the rounds whose candidate calls were recorded (op trace; samples dropped)."""
    fresh_inputs: str
    """How the inputs changed between timed rounds, in words (or why they did not)."""
    fresh_inputs_ms_per_round: float
    """Median milliseconds the input refresh took per round (outside the timed calls)."""
    spot_reads: str
    """What the judge read of every timed call's outputs inside the timed window, in words."""
    spot_read_ms_per_call: float
    """Median milliseconds of those spot reads per call."""
    input_placement: str
    """How the timed inputs were placed in shared memory for each runner, in words."""
    candidate_timed_in: str
    """Which runner timed the candidate (the trials' runner, or a fresh one beside the best)."""
    confirmation: dict[str, Any]
    """The second pair of runners' timing, when the judge ran one: samples, CI, ``confirmed``."""
    extra_batches: int
    """Batches of rounds beyond the first, timed because the CI straddled the bar."""
    sequential_log: list[str]
    """Why each extra batch ran, and how the last ended."""
    timed_rounds_stop: str
    """How the timed rounds ended: all of them, or early at ``timing_ci_pct``."""
    sequential_decision_changed: bool
    """The extra batches decided what the first could not."""
    flops: int
    """Floating-point operations of one reference call (torch's flop counter; 0 unknown)."""
    min_compute_time_bound_ms: float
    """The least time one call can take by the compute roof, milliseconds (CPU backend)."""
    stress: dict[str, Any]
    """The stress variants: ``used`` (run and passed) and ``skipped`` (with why)."""
    cores_used: NotRequired[dict[str, float]]
    """Cores of CPU time per wall second for the reference and the candidate (the thread budget)."""
    timing_method: NotRequired[str]
    """What clock timed the calls, in words."""
    failed_phase: NotRequired[str]
    """The judge's phase when a verdict other than ``ok`` was decided."""
    precise_reference: NotRequired[dict[str, Any]]
    """How the float64 reference that settled a close comparison was computed."""
    device: NotRequired[str]
    """GPU backend: where the kernels ran (``device_note``)."""
    best_error: NotRequired[str]
    """Why the best could not be timed beside the candidate (then rule 4 of the acceptance decides)."""
