"""The anti-cheat rule registry: every rule's name, the layers that enforce it, and why it exists.

Split from ``anticheat.py`` (the static layer) so the judge's process, which reports under these
names, loads the registry without the static scanner. ``anticheat`` re-exports every name here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    layers: tuple[str, ...]  # where it is enforced: static, runtime, problem, timing, sandbox
    rationale: str


RULES: dict[str, Rule] = {}


def _rule(name: str, layers: tuple[str, ...], rationale: str) -> str:
    RULES[name] = Rule(name, layers, rationale)
    return name


# --- the rules, each with why it exists -------------------------------------------------------

NO_TORCH_COMPUTE = _rule(
    "no_torch_compute",
    ("static", "runtime"),
    "The kernel must do the work. Calling the PyTorch op it replaces (or any torch compute: "
    "functional ops, tensor math methods, operators on tensors, nn layers' forward) times PyTorch "
    "against itself and hides a slow or absent kernel. Allowed glue: allocation (empty*, zeros*, "
    "ones*, full*, tensor), views and shape bookkeeping (view, reshape, contiguous, size, stride, "
    "permute, ...), clone/copy_ and dtype up-casts. At runtime every aten op the forward dispatches "
    "is recorded and anything outside that glue set is a violation.",
)
NO_LIBRARY_COMPUTE = _rule(
    "no_library_compute",
    ("static",),
    "numpy, scipy, numba, jax and similar libraries are someone else's kernels; using them for "
    "the work measures that library, not the candidate.",
)
HAS_COMPILED_KERNEL = _rule(
    "has_compiled_kernel",
    ("static",),
    "A candidate without a compiled kernel (pragma_cext.load_cpp, load_inline or "
    "cpp_extension.load; with backend=gpu a @triton.jit function) can only be computing with torch "
    "or returning something precomputed.",
)
COMPILED_CODE_RAN = _rule(
    "compiled_code_ran",
    ("runtime",),
    "Building a kernel proves nothing if forward never calls it: every call into the candidate's "
    "own libraries during the correctness trials is counted and at least one is required.",
)
NO_TRY_FALLBACK = _rule(
    "no_try_fallback",
    ("static",),
    "An except branch that swallows the kernel's failure and answers another way (usually with "
    "torch) turns a broken kernel into a passing one. Handlers must re-raise.",
)
NO_REFERENCE_MODEL = _rule(
    "no_reference_model",
    ("static", "runtime"),
    "Subclassing, copying or reaching for the reference Model runs the reference's own forward. "
    "Statically: no class named Model, no base named Model, no access to the problem module; at "
    "runtime: ModelNew and its submodules must not be instances of the problem's Model.",
)
NO_THREADS_OR_PROCESSES = _rule(
    "no_threads_or_processes",
    ("static", "runtime"),
    "Work done on a thread or process after forward returns escapes the timer, and a process left "
    "behind keeps using the machine. OpenMP is allowed (its team joins before the region ends). "
    "Runtime: no new Python threads alive and no child processes after a call.",
)
NO_MONKEYPATCHING = _rule(
    "no_monkeypatching",
    ("static", "runtime"),
    "Replacing time.perf_counter, torch functions, Tensor methods or environment variables changes "
    "what the verifier measures or compares. Runtime: the identities of time, torch, torch.Tensor, "
    "torch.nn.functional, nn.Module and builtins attributes are snapshotted before the candidate "
    "loads and compared after every phase (the verifier also keeps its own timer references).",
)
NO_INTROSPECTION = _rule(
    "no_introspection",
    ("static",),
    "gc, inspect, frames, sys.modules and builtins let a candidate find the reference output, the "
    "held-out seed or the verifier's state in memory.",
)
NO_DYNAMIC_CODE = _rule(
    "no_dynamic_code",
    ("static",),
    "eval/exec/compile, importlib and getattr with a computed name hide which functions are called "
    "from every static rule.",
)
NO_TENSOR_SUBCLASS = _rule(
    "no_tensor_subclass",
    ("static",),
    "A torch.Tensor subclass (or __torch_function__/__torch_dispatch__ override) can compute lazily "
    "when the verifier reads it, or lie to comparisons, so the timed call does no work.",
)
PLAIN_DENSE_OUTPUT = _rule(
    "plain_dense_output",
    ("runtime",),
    "Outputs must be exactly torch.Tensor, strided, without lazy conjugate/negative bits: anything "
    "else can defer work past the timer or behave differently under comparison.",
)
NO_PRECISION_DOWNGRADE = _rule(
    "no_precision_downgrade",
    ("static", "runtime"),
    "Computing an fp32 problem in fp16/bf16 is faster and often passes loose checks on friendly "
    "data, but it is a different, less accurate operator. Skipped when the problem itself uses "
    "half precision. Runtime: no conversion to fp16/bf16 dispatched in forward.",
)
NO_FAST_MATH = _rule(
    "no_fast_math",
    ("static",),
    "-ffast-math/-Ofast (flags or #pragma/attribute optimize) links crtfastmath.o, which turns on "
    "flush-to-zero and denormals-are-zero for the whole process (the reference included, so both "
    "sides change together), and allows reassociation and NaN/Inf assumptions the reference does "
    "not make.",
)
FP_ENVIRONMENT = _rule(
    "fp_environment",
    ("static", "runtime"),
    "The floating-point environment is shared by the whole process: if loading or calling the "
    "candidate flushes denormals (crtfastmath, torch.set_flush_denormal), the reference's results "
    "change too and the comparison is no longer against the real operator.",
)
NO_FILESYSTEM_WRITES = _rule(
    "no_filesystem_writes",
    ("static", "sandbox"),
    "A kernel needs no files (load_cpp writes the build). Writes could plant libraries in the "
    "shared build cache, tamper with results or fill the disk. The sandbox enforces it: Landlock "
    "allows writes only in the private directory and the build cache.",
)
NO_NETWORK = _rule(
    "no_network",
    ("static", "sandbox"),
    "Candidate code has no reason to talk to the network; it could fetch precomputed answers or "
    "leak data. The sandbox runs it in a network namespace (and Landlock denies TCP).",
)
NO_STATE_ACROSS_CALLS = _rule(
    "no_state_across_calls",
    ("static",),
    "Timing repeats the same inputs, so a forward that remembers results (self attributes set "
    "outside __init__, module-level caches, global, lru_cache) wins by memoization and goes stale "
    "when inputs change. State computed from the parameters alone (weights packed on the first "
    "call) is allowed: a plain assignment that reads no argument of the call, nothing derived from "
    "one, and not its own old value.",
)
INPUTS_UNMODIFIED = _rule(
    "inputs_unmodified",
    ("runtime",),
    "A kernel that writes into its inputs (in-place ReLU) corrupts the caller's data and makes "
    "later calls cheaper or wrong; inputs are compared bit for bit after every call.",
)
FRESH_OUTPUT = _rule(
    "fresh_output",
    ("runtime",),
    "Every call must return new memory: an output overlapping an input, the reference's output or "
    "an earlier output (kept alive on purpose) is a cached or aliased result.",
)
OUTPUT_STABLE = _rule(
    "output_stable",
    ("runtime",),
    "The output is snapshotted the moment forward returns and compared again later: if it changes, "
    "work is still running after the timer stopped.",
)
STATELESS = _rule(
    "stateless",
    ("runtime",),
    "The same input buffers refilled with new values must give the new correct answer; a cache "
    "keyed on addresses or shapes returns the old one.",
)
DETERMINISTIC = _rule(
    "deterministic",
    ("runtime",),
    "Two calls on the same inputs should agree bit for bit. Differences within tolerance (e.g. "
    "atomics in a parallel reduction) are reported as a warning, not rejected.",
)
THREAD_BUDGET = _rule(
    "thread_budget",
    ("static", "runtime", "timing"),
    "Reference and candidate are compared at the same thread count: the candidate must not change "
    "torch's thread count, start more OS threads than its OpenMP team allows, or burn more CPU "
    "time than num_threads cores over its timed calls.",
)
TOLERANCE_DISCRIMINATES = _rule(
    "tolerance_discriminates",
    ("problem",),
    "If one fixed output (all zeros, a constant, any tensor that ignores the inputs) passes the "
    "tolerance against every reference output the verifier compared, correctness proves nothing; "
    "the problem/tolerance pair is rejected and reported instead of accepting any kernel. Judged "
    "across the trials and the stress variants together, so a scalar loss (nearly constant on "
    "inputs of one range) is decidable.",
)
STRESS_INPUTS = _rule(
    "stress_inputs",
    ("runtime",),
    "Most problems draw inputs from one range (torch.rand: [0, 1)); a kernel right only there (a "
    "copy for ReLU, a polynomial fitted on [0, 1)) passes every trial. The candidate is also "
    "compared on the last trial's inputs negated, scaled by 1e-3 and 1e3 and with mixed signs, "
    "keeping what the problem states (integer, discrete, probability, symmetric, triangular, "
    "diagonal, positive-definite inputs keep their structure; tools/judging/stress.py). A variant whose "
    "reference output is not finite is skipped and listed with the reason.",
)
SPEEDUP_PLAUSIBLE = _rule(
    "speedup_plausible",
    ("timing",),
    "A kernel must move at least its inputs and outputs through memory once; a time below that "
    "traffic at the machine's measured bandwidth (with slack) is physically implausible and is "
    "flagged as suspicious (never crowned as a new best).",
)
NO_SIDE_STREAMS = _rule(
    "no_side_streams",
    ("static", "runtime"),
    "On a GPU, work launched on another CUDA stream is not ordered with the verifier's events: the "
    "timer stops while it still runs. Statically: no torch.cuda stream objects or stream switches; at "
    "runtime: every Triton launch during the checks uses the current stream, and the output is final "
    "when forward returns. Timing also synchronizes the whole device before its end event.",
)
NOISY_NEIGHBOUR = _rule(
    "noisy_neighbour",
    ("timing",),
    "While another implementation is timed, the candidate's (and the best's) process group is "
    "stopped, so nothing it installed (interval timers, signal handlers, C threads, children) can "
    "slow the reference down. Any CPU time its runner, or a process it left outside its group, "
    "accrues over the other implementations' calls (read from /proc by the judge) rejects it.",
)
FAIR_SCHEDULING = _rule(
    "fair_scheduling",
    ("timing", "sandbox"),
    "Runners share a uid and hold no capabilities, yet Linux lets a process lower the priority of, "
    "change the policy of, or move any process of its uid: the reference's runner reniced to 19 or "
    "put in SCHED_IDLE is timed in the gaps other work leaves. The candidate's and the best's "
    "seccomp filters refuse scheduling calls aimed at anything but the calling thread, and any "
    "affinity change; around the timed rounds the judge reads every runner's tasks (and its own) "
    "from /proc: a nice value, policy or core set other than the one it was forked with rejects.",
)
AUDITED_CALLS = _rule(
    "audited_calls",
    ("timing",),
    "Timed calls run on inputs whose every element is new before every round (fresh draws of the "
    "problem's distribution, structure kept). Every timed call's output is spot-checked: elements "
    "at secret positions, read by the judge when the call returns, against the reference's; a "
    "mismatch and randomly chosen rounds are compared in full, in the judge, with no message to "
    "the runner: a memo, a stale buffer or a kernel that behaves differently when unobserved "
    "fails on a call it could not know was checked.",
)
OUTPUT_MATERIALISED = _rule(
    "output_materialised",
    ("timing",),
    "A timed call ends when its output exists. Before the judge's clock stops, the judge itself "
    "reads elements of the output at positions it drew in secret for that round, from the "
    "runner's memory (process_vm_readv: no code of the runner runs, no signal reaches it). An "
    "output whose pages are unmapped or protected when the call returns (to be computed later, "
    "in a fault handler or a thread), or that the judge is not allowed to read, rejects it.",
)
MEMORY_LIMIT = _rule(
    "memory_limit",
    ("sandbox",),
    "Address space is limited per sandbox (memory_limit_bytes) so a candidate that fills memory "
    "fails alone instead of taking the machine down.",
)
