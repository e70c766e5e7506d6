"""Run settings: one ``Context`` dataclass, passed to the graph as its ``context_schema``.

Precedence is explicit argument > environment variable (``PRAGMA_<FIELD>``) > default, and it
is implemented once, in :func:`resolve_context`. Secrets (API keys) and deployment paths are the
only settings read from the environment anywhere else.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal


def _knob(default: Any, description: str) -> Any:
    return field(default=default, metadata={"description": description})


@dataclass(frozen=True)
class Context:
    """Everything that configures one optimization run (not part of checkpointed state)."""

    coder_model: str = _knob(
        "", "Chat model for the Coder, 'provider:model' (e.g. 'openai:deepseek-r1'). Env PRAGMA_CODER_MODEL."
    )
    conductor_model: str = _knob("", "Chat model for the Conductor (analysis and repair). Empty: same as coder_model.")
    llm_timeout_s: float = _knob(600.0, "Timeout of one LLM request, seconds.")
    structured_output: Literal["prompt", "json_mode", "function_calling", "json_schema"] = _knob(
        "prompt",
        "How the Conductor's guidance is requested: JSON in the prompt (any server), or the "
        "server's json_mode / function_calling / json_schema support. Malformed output gets one re-ask.",
    )
    price_table_path: str = _knob(
        "", "JSON file {model spec: {input_usd_per_1m_tokens, output_usd_per_1m_tokens}}; empty: no costs."
    )
    max_tokens_total: int = _knob(0, "End the run (keeping the best) after this many LLM tokens; 0: no limit.")
    max_cost_usd: float = _knob(0.0, "End the run (keeping the best) after this LLM cost in USD; 0: no limit.")
    max_wall_s: float = _knob(0.0, "End the run (keeping the best) after this many seconds; 0: no limit.")
    backend: Literal["cpu", "gpu"] = _knob(
        "cpu",
        "Target backend of generated kernels: 'cpu' (C++) or 'gpu' (Triton on a CUDA device; without "
        "one, TRITON_INTERPRET=1 checks correctness on the CPU).",
    )
    gpu_timing: Literal["events", "do_bench"] = _knob(
        "events",
        "Kept so existing settings still load; it changes nothing. Since verifier v2 the verdict on CUDA "
        "is timed by the judge's clock around each call, which ends with a device-wide synchronize "
        "(events or do_bench would run in the candidate's process, where it could patch them).",
    )
    ncu_timeout_s: float = _knob(600.0, "Wall-clock limit for one Nsight Compute run, seconds.")
    ncu_calls: int = _knob(
        2, "Forward calls profiled by Nsight Compute (each kernel launch is replayed once per metric pass)."
    )
    agent_mode: Literal["pragma", "no-profile", "single-agent"] = _knob(
        "pragma",
        "Which agents run: 'pragma' (Coder, Verifier, Profiler, Conductor), 'no-profile' "
        "(N-PRAGMA: the same agents, but nothing is profiled and the Conductor sees only correctness "
        "and time) or 'single-agent' (the Coder alone, fed the verifier's compiler, correctness and "
        "runtime feedback, KernelBench multi-turn style).",
    )
    candidate_format: Literal["auto", "module", "kernel"] = _knob(
        "auto",
        "What the Coder writes: 'module' (a Python module defining ModelNew), 'kernel' (only a C++ "
        'translation unit with one extern "C" function whose signature PRAGMA states; PRAGMA generates the '
        "module around it, and problems it cannot describe fall back to module) or 'auto' (kernel for the "
        "embedded local model, module otherwise).",
    )
    repair_advice: Literal["auto", "rules", "rules+model"] = _knob(
        "auto",
        "Repair instructions after a failed candidate: 'rules' (PRAGMA's fixed hint per verifier rule and "
        "failure status, no LLM call), 'rules+model' (the hints plus the Conductor model's advice) or 'auto' "
        "(rules for the embedded local model, rules+model otherwise).",
    )
    optimize_advice: Literal["auto", "rules", "model"] = _knob(
        "auto",
        "The Conductor's guidance after a correct candidate: 'model' (the Conductor model reads the profile, "
        "the knowledge and the best), 'rules' (PRAGMA's fixed plan for the profile's bottleneck label, with "
        "its evidence; no LLM call, never stops a run) or 'auto' (rules for the embedded local model, whose "
        "Conductor calls took minutes each; model otherwise).",
    )
    prompt_budget_tokens: int = _knob(
        0,
        "Upper bound on one prompt (system + human), approximate tokens; the least important sections are "
        "trimmed first. 0: automatic (fits the embedded model's context, no limit for other models).",
    )
    constrained_decoding: Literal["auto", "grammar", "off"] = _knob(
        "auto",
        "Constrain the Coder's reply to one fenced code block with a GBNF grammar (llama.cpp servers): "
        "'grammar', 'off', or 'auto' (grammar for the embedded local model only).",
    )
    kernel_memory: bool = _knob(
        True,
        "Use and grow the memory of verified kernels (knowledge/kernels.py): the Coder's prompt shows the "
        "most similar verified kernels, and every run's accepted best is added. False: neither.",
    )
    # Why a switch apart from kernel_memory: runs compared with each other (pragma eval's modes,
    # its reruns) must not hand each other kernels through the store; the shipped ones are fair.
    kernel_memory_shared: bool = _knob(
        True,
        "With kernel_memory: show kernels that earlier runs added and add this run's best. False: only the "
        "shipped kernels are shown and nothing is added (pragma eval's default, so that compared runs and "
        "modes cannot hand each other kernels).",
    )
    kernel_memory_tokens: int = _knob(
        900, "Cap on the verified-kernels section of the Coder's prompt, approximate tokens; 0 leaves it out."
    )
    max_iterations: int = _knob(15, "Maximum number of candidates the Coder writes in one run.")
    # 4: the issue-13 runs (4 iterations, strong model) stopped after 2-3 candidates and lost gains
    # the next ones found (max-pool 47x at its stop, 72x two candidates later without it); the
    # first candidate plus three profile-guided refinements is the least that shows whether the
    # profile's direction pays, and costs ~4 LLM round-trips, a fraction of max_iterations=15.
    min_iterations: int = _knob(
        4,
        "Candidates written before the Conductor's stop is honoured; after that a stop also needs the best "
        "kernel near its roof (graph/routing.py: stop_verdict). max_iterations and budgets still end runs earlier.",
    )
    max_repairs: int = _knob(4, "Maximum consecutive failed candidates before the run stops trying to repair.")
    search: Literal["greedy", "beam", "tree"] = _knob(
        "greedy",
        "How candidates are searched (nodes/search.py): 'greedy' (the paper's loop: each candidate refines the "
        "historical best), 'beam' (candidates_per_round lineages, each refined from its own best) or 'tree' "
        "(best-first over the whole lineage tree: UCB on speedup, with the Conductor's diagnosis as the prior).",
    )
    candidates_per_round: int = _knob(
        0,
        "Candidates the Coder writes per round, in parallel (LangGraph Send), verified one after another. "
        "0: 1 for greedy (the paper's loop), 2 for beam and tree.",
    )
    tree_exploration: float = _knob(
        0.5, "search=tree: weight of the UCB exploration term against the normalised speedup (0: pure best-first)."
    )
    max_llm_calls: int = _knob(
        0,
        "End the run (keeping the best) after this many LLM calls (Coder, Conductor and repair together); "
        "0: no limit. One flag for equal-budget comparisons of search policies.",
    )
    # 60: a sweep of two tunables and the two build knobs times ~8 variants at ~3-5 s each here,
    # plus the winner's gate; an LLM call of the embedded model costs 30-90 s.
    tune_budget_s: float = _knob(
        60.0,
        "Seconds the tuner (nodes/tune.py, no LLM) may spend sweeping one verified candidate's tunables "
        "('constexpr int TILE = 64; // tune: 16 32 64 128') and build knobs (vector width, unrolling), "
        "the winner's gate verification included. 0: no tuner.",
    )
    # Why a rewrite and not only guidance: told to use streaming stores (with the whole file to copy)
    # the embedded model answered with its plain loop, or garbled the loop bound while copying
    # (make demo's ReLU: the streaming kernel at attempt 4; group_norm in emb1128b: a mismatch).
    tune_rewrites: Literal["auto", "on", "off"] = _knob(
        "auto",
        "Rewrites the tuner tries on a verified C++ kernel, as variants verified like any other: streaming "
        "stores for an element-wise float loop (the same arithmetic, the output written with _mm256_stream_ps; "
        "nodes/playbook.streaming_code). A kernel a rewrite applies to is swept even without tunables. "
        "'auto': on for the embedded local model, off otherwise.",
    )
    compile_timeout_s: float = _knob(180.0, "Wall-clock limit for building a candidate, seconds.")
    run_timeout_s: float = _knob(120.0, "Wall-clock limit for checking and timing a candidate, seconds.")
    memory_limit_bytes: int = _knob(8 * 2**30, "Address-space limit of a sandboxed candidate, bytes.")
    atol: float = _knob(1e-4, "Absolute tolerance for fp32 correctness checks.")
    rtol: float = _knob(1e-4, "Relative tolerance for fp32 correctness checks.")
    correctness_trials: int = _knob(3, "Number of fresh seeded inputs a candidate must match.")
    warmup_calls: int = _knob(5, "Untimed calls before timing, per implementation.")
    timed_calls: int = _knob(
        100,
        "Timed calls per implementation (interleaved with the other); at most, when timing_ci_pct ends "
        "the rounds earlier.",
    )
    timing_ci_pct: float = _knob(
        1.5,
        "With no best to beat, timed rounds end early (after 30, looked at every 10) once the 95% CI of "
        "the speedup lies within +-this percent of it; 0: always timed_calls rounds. Against a best "
        "every batch runs whole.",
    )
    warmup_s: float = _knob(
        0.5,
        "Longest warm-up past warmup_calls, seconds: warm-up rounds continue until every "
        "implementation's call time settled (two windows of 5 calls within 3%) or this much time passed.",
    )
    acceptance_margin: float = _knob(
        0.08,
        "A candidate replaces the best only when the 95% CI of its speedup over the best lies above "
        "1 + this margin: an identical kernel timed as candidate and as best (two runner processes) "
        "read within 3% of itself on an idle 2-core machine and up to 9% apart with an eval running "
        "beside, so a CI just above 1.0 is not evidence of a gain.",
    )
    prestarted_judge: bool = _knob(
        True,
        "Fork each verification's judge from a sandboxed process started once per launcher thread "
        "with torch already imported (saves the interpreter start and torch import per candidate). Off: "
        "a fresh sandboxed process per verification.",
    )
    fresh_inputs: bool = _knob(
        True,
        "Change a few random input elements between timed calls (outside the timed region, the "
        "same for every implementation) so no timed call sees inputs it has seen before. Off only to "
        "measure what freshness costs.",
    )
    static_checks: bool = _knob(
        True, "Run the static (AST) anti-cheat rules before the sandbox. Turn off only to test the runtime rules alone."
    )
    num_threads: int = _knob(1, "Threads for both reference and candidate (torch and OpenMP).")
    seed: int = _knob(1234, "Base seed for generated inputs and weights.")
    profile_calls: int = _knob(20, "Kernel calls inside the profiled region.")
    profile_simulate: Literal["auto", "always", "never"] = _knob(
        "auto",
        "Callgrind cache/branch simulation of the kernel (about 30-60 s per profile): auto = only when perf "
        "has no hardware counters and the cheap evidence (time, roofline, static analysis, llvm-mca) leaves the "
        "bottleneck ambiguous; always; or never. Naming a sim_* metric in extra_metrics runs it for that profile.",
    )
    callgrind_calls: int = _knob(
        2,
        "Kernel calls simulated by callgrind after one warm-up call; fewer when a call is too slow to "
        "simulate within half of callgrind_timeout_s.",
    )
    callgrind_timeout_s: float = _knob(300.0, "Wall-clock limit for the callgrind run, seconds.")
    profile_hotspots: bool = _knob(True, "Sample hot spots of the kernel region with perf record -e cpu-clock.")
    profile_micro: Literal["on", "cheap", "off"] = _knob(
        "cheap",
        "Micro-profiles chosen by the bottleneck label, each answering one question with its cost "
        "(tools/profilers/micro.py): does the hot loop carry a dependency (llvm-mca, free), is moving the bytes "
        "the limit (write-only and read-only passes, milliseconds), does a wider vector help (256- and 512-bit "
        "rebuilds, each timed: 8-20 s; AVX-512 CPUs, compute-side and cache-resident labels). cheap = all but "
        "the rebuilds, which run when the Conductor asks (extra_metrics wider_vectors); on = the rebuilds too; "
        "off = none.",
    )
    measure_peaks: bool = _knob(
        True,
        "Measure this machine's peak FLOP/s and memory bandwidth once (a few seconds, cached in the "
        "data dir) for the roofline.",
    )
    knowledge_max_chars: int = _knob(
        6000, "Cap on the profiler-knowledge section of the Conductor's prompt, characters; 0 leaves it out."
    )
    knowledge_tool_calls: int = _knob(
        3,
        "Metric lookups (tool lookup_profiler_metric) a tool-capable Conductor model may make per "
        "decision; 0 disables tool use.",
    )


def field_descriptions() -> dict[str, str]:
    return {f.name: f.metadata.get("description", "") for f in dataclasses.fields(Context)}


def _coerce(raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return raw


def resolve_context(env: dict[str, str] | None = None, **explicit: Any) -> Context:
    """Build a Context: explicit (non-None) values win, then PRAGMA_<NAME> env vars, then defaults."""
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Context):
        if explicit.get(f.name) is not None:
            values[f.name] = explicit[f.name]
        elif (raw := env.get(f"PRAGMA_{f.name.upper()}")) not in (None, ""):
            try:
                values[f.name] = _coerce(raw, f.default)
            except ValueError as exc:
                raise ValueError(f"PRAGMA_{f.name.upper()}={raw!r} is not a valid {type(f.default).__name__}") from exc
    unknown = set(explicit) - {f.name for f in dataclasses.fields(Context)}
    if unknown:
        raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
    for name, value in values.items():
        allowed = _choices(name)
        if allowed and value not in allowed:
            raise ValueError(f"{name}={value!r} is not one of: {', '.join(allowed)}")
    return Context(**values)


def _choices(name: str) -> tuple[str, ...]:
    hint = typing.get_type_hints(Context).get(name)
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else ()


def coerce_setting(name: str, raw: str) -> Any:
    """Parse a command-line string for field ``name`` into the field's type."""
    return _coerce(raw, getattr(Context(), name))


def context_to_dict(ctx: Context) -> dict[str, Any]:
    return dataclasses.asdict(ctx)


def data_dir() -> Path:
    """Runtime files (checkpoints, run registry, builds) live here, outside the repository."""
    path = Path(os.environ.get("PRAGMA_DATA_DIR") or Path.home() / ".pragma")
    path.mkdir(parents=True, exist_ok=True)
    return path
