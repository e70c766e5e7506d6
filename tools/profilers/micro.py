"""Micro-profiles: small targeted experiments, each answering one question a raw metric leaves open.

A roofline share or an IPC leaves the model guessing what to try; a two-minute guess costs a model
call and a verification. These experiments answer the question the bottleneck label raises, each
with its cost in seconds, and lead the profile the Conductor reads (``render``). They follow the
cold/warm experiment (tools/inside/region.py): collect -> parse -> render, "unavailable" with a reason.

- ``wider_vectors`` (does a wider vector help?): the kernel rebuilt with
  ``-mprefer-vector-width=256`` and ``=512`` (tools/tunables.py adds the flag to its
  ``load_cpp`` calls), each timed in the profiler's sandboxed region, one after the other under the
  machine's timing slot. Compute-side and cache-resident labels, on CPUs with AVX-512.
- ``loop_dependency`` (does the hot loop carry a dependency?): llvm-mca's bottleneck analysis of the
  hot loop (already run by mca.py): cycles per iteration against the loop's throughput bound
  (block reciprocal throughput); well above it, a dependency chain sets the pace.
- ``store_bandwidth`` (is moving the bytes the limit?): the region times only writing the kernel's
  outputs and only reading its inputs on the same tensors (``region.traffic_experiment``);
  memory-side labels.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

QUESTIONS = {
    "wider_vectors": "does a wider vector help?",
    "loop_dependency": "does the hot loop carry a dependency?",
    "store_bandwidth": "is moving the bytes (load/store bandwidth) the limit?",
}
# Which questions each bottleneck label raises, most useful first.
BY_LABEL: dict[str, tuple[str, ...]] = {
    "compute-bound": ("loop_dependency", "wider_vectors"),
    "not-vectorized": ("loop_dependency",),
    "cache-resident": ("store_bandwidth", "wider_vectors", "loop_dependency"),
    "dram-bound": ("store_bandwidth",),
    "memory-bound": ("store_bandwidth",),
    "poor-locality": ("store_bandwidth",),
    "frontend-bound": ("loop_dependency",),
    "bad-speculation": ("loop_dependency",),
    "unknown": ("loop_dependency", "store_bandwidth"),
}
DEPENDENCY_RATIO = 1.5  # cycles/iteration this far above the throughput bound: a dependency chain sets the pace
FREE_RATIO = 1.1  # within this of the throughput bound: no chain, the ports set the pace
WIDTH_GAIN = 0.08  # a variant this much faster than the other is a real difference, not run-to-run noise
TRAFFIC_LIMIT = 1.25  # the kernel within this factor of only moving its bytes: bandwidth is the limit
REBUILD_COST_S = 10.0  # two builds and two profiled runs, measured 8-20 s here
MAX_CALL_MS = 250.0  # slower kernels skip the rebuild experiment (two more profiled runs would cost too much)


def choose(label: str) -> list[str]:
    return list(BY_LABEL.get(label, ()))


def _answer(question: str, status: str, text: str, cost_s: float, **extra: Any) -> dict[str, Any]:
    return {"question": question, "status": status, "answer": text, "cost_s": round(cost_s, 2), **extra}


# --- does the hot loop carry a dependency? ---------------------------------------------------


def loop_dependency(mca: dict[str, Any] | None) -> dict[str, Any]:
    """From llvm-mca's analysis of the hot loop (no new run: its cost is the mca run's)."""
    cost = float(((mca or {}).get("wall_s")) or 0.0)
    if not mca or mca.get("status") != "ok":
        why = (mca or {}).get("reason", "no hot loop was analysed")
        return _answer("loop_dependency", "unavailable", f"llvm-mca: {why}", cost)
    cycles, bound = float(mca.get("cycles_per_iteration", 0.0)), float(mca.get("block_rthroughput", 0.0))
    if cycles <= 0 or bound <= 0:
        return _answer("loop_dependency", "unavailable", "llvm-mca gave no throughput bound for the loop", cost)
    ratio = cycles / bound
    said = str(mca.get("bottleneck", ""))
    figures = f"{cycles:.3g} cycles/iteration against a throughput bound of {bound:.3g} ({ratio:.2f}x, llvm-mca)"
    if said.startswith("data dependencies") or (ratio >= DEPENDENCY_RATIO and not said.startswith("none")):
        text, verdict = (
            f"yes: {figures}: a chain across iterations (one accumulator, a recurrence) sets the pace; "
            "independent accumulators would overlap it",
            "yes",
        )
    elif said.startswith("none") or ratio <= FREE_RATIO:
        text, verdict = f"no: {figures}: the loop issues at its port throughput; only fewer instructions help", "no"
    else:
        text, verdict = f"partly: {figures}", "partly"
    return _answer("loop_dependency", "ok", text, cost, verdict=verdict, ratio=ratio)


# --- is moving the bytes the limit? ------------------------------------------------------------


def store_bandwidth(traffic: dict[str, Any] | None, kernel_ms: float) -> dict[str, Any]:
    """From the region's traffic experiment against the kernel's warm per-call time."""
    if not traffic:
        return _answer("store_bandwidth", "unavailable", "the traffic experiment did not run (no cold/warm run)", 0.0)
    cost = float(traffic.get("cost_s", 0.0))
    if traffic.get("status") != "ok":
        return _answer("store_bandwidth", "unavailable", str(traffic.get("reason", "not run")), cost)
    write_ms, read_ms = float(traffic["write_ms"]), float(traffic["read_ms"])
    # The bytes' floor is a range: reads and writes wholly overlapped (the longer pass alone) up to one
    # after the other (their sum). Why (ablation transcripts, 2026-11-28): the sum alone was called
    # "the floor", a GELU was told "only fewer bytes help" at 1.09x of it and its next kernel ran at
    # 0.80x of that floor.
    low_ms, floor_ms = max(write_ms, read_ms), write_ms + read_ms
    if kernel_ms <= 0 or floor_ms <= 0:
        return _answer("store_bandwidth", "unavailable", "no time measured", cost)
    ratio = kernel_ms / floor_ms
    figures = (
        f"the kernel takes {kernel_ms:.3g} ms; plain passes that only write its outputs and only read its inputs "
        f"(each once) take {write_ms:.3g} and {read_ms:.3g} ms, so moving its bytes takes {low_ms:.3g} ms with reads "
        f"and writes overlapped, {floor_ms:.3g} ms one after the other"
    )
    if kernel_ms <= TRAFFIC_LIMIT * low_ms:
        text, verdict = (
            f"yes: {figures}; stores {100.0 * write_ms / kernel_ms:.0f}% of its time: only fewer bytes "
            "(fused passes) or streaming stores (where it has none yet: no read of each output line first) help",
            "yes",
        )
    elif ratio <= TRAFFIC_LIMIT:
        text, verdict = (
            f"partly: {figures}; it sits between the two, so the bytes bind it only as far as its reads and writes "
            f"do not overlap: overlapping them (prefetch the next input while storing, one pass instead of two) or "
            f"fewer bytes could gain up to {kernel_ms / low_ms:.2f}x (an input read twice raises the floor)",
            "partly",
        )
    else:
        text, verdict = (
            f"no: {figures}: the bytes could move {ratio:.1f}-{kernel_ms / low_ms:.1f}x faster; the time goes to "
            "instructions per byte",
            "no",
        )
    return _answer("store_bandwidth", "ok", text, cost, verdict=verdict, ratio=ratio)


# --- does a wider vector help? -----------------------------------------------------------------


def collect_vector_widths(problem_path: str, code: str, ctx: Any) -> dict[str, Any]:
    """Time the kernel built with each preferred vector width in the profiler's sandboxed region.
    Returns ``{status, per_call_ms: {"256": ms, "512": ms}, cost_s}`` or unavailable with why."""
    from pragma.tools import tunables
    from pragma.tools.launch import timing_slot
    from pragma.tools.profilers import runs

    t0 = time.monotonic()
    if not tunables.build_knobs(code, True):
        return {
            "status": "unavailable",
            "reason": "the kernel chooses its own build flags (or builds nothing through load_cpp)",
            "cost_s": 0.0,
        }
    variants = {w: tunables.with_flags(code, [f"-mprefer-vector-width={w}"]) for w in ("256", "512")}
    # Both builds first, in parallel, sharing the timing slot (verify._build): the exclusive hold then
    # covers only the runs.
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = dict(zip(variants, pool.map(lambda v: _prebuild(problem_path, v, ctx), variants.values()), strict=True))
    per_call: dict[str, float] = {}
    for width, variant in variants.items():
        if built[width] != "ok":
            return {
                "status": "unavailable",
                "reason": f"the {width}-bit build failed: {built[width]}",
                "cost_s": round(time.monotonic() - t0, 2),
            }
        run_dir = runs.RunDir()
        try:
            with timing_slot.hold(f"micro-profile vector width {width}"):
                # A token flush buffer switches the region's micro-experiments on: their warm figure
                # is a median of calls, steadier on a shared machine than the region's mean.
                outcome = runs._sandboxed(
                    problem_path,
                    variant,
                    ctx,
                    run_dir,
                    prefix=[],
                    updates={"op_cost": False, "micro_flush_bytes": 4096},
                )
        finally:
            run_dir.close()
        result = outcome.result or {}
        if result.get("status") != "ok":
            return {
                "status": "unavailable",
                "reason": f"the {width}-bit build did not run: {runs._why(outcome)}",
                "cost_s": round(time.monotonic() - t0, 2),
            }
        warm = (result.get("micro") or {}).get("warm_ms")
        per_call[width] = float(warm or result["per_call_ms"])
    return {"status": "ok", "per_call_ms": per_call, "cost_s": round(time.monotonic() - t0, 2)}


def _prebuild(problem_path: str, code: str, ctx: Any) -> str:
    """Compile a variant's C++ into the build cache in a sandboxed build worker; 'ok' or why not."""
    from pragma.tools.verify import prebuild

    return prebuild(problem_path, code, ctx)


def wider_vectors(collected: dict[str, Any]) -> dict[str, Any]:
    cost = float(collected.get("cost_s", 0.0))
    if collected.get("status") != "ok":
        return _answer("wider_vectors", "unavailable", str(collected.get("reason", "not run")), cost)
    narrow, wide = collected["per_call_ms"]["256"], collected["per_call_ms"]["512"]
    figures = f"-mprefer-vector-width=512 {wide:.3g} ms/call, =256 {narrow:.3g} ms/call"
    if wide < narrow * (1 - WIDTH_GAIN):
        text, verdict = f"yes: {figures} ({narrow / wide:.2f}x): build for 512-bit vectors", "yes"
    elif narrow < wide * (1 - WIDTH_GAIN):
        text, verdict = f"no, narrower is faster: {figures} ({wide / narrow:.2f}x)", "no"
    else:
        text, verdict = f"no: {figures}, within {WIDTH_GAIN * 100:.0f}% (noise): the width is not the limit", "no"
    return _answer("wider_vectors", "ok", text, cost, verdict=verdict, per_call_ms=collected["per_call_ms"])


# --- orchestration and rendering ------------------------------------------------------------------


def run(
    label: str,
    *,
    mca: dict[str, Any] | None,
    traffic: dict[str, Any] | None,
    kernel_ms: float,
    has_avx512: bool,
    rebuild: Any = None,
    asked: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """The answers to the questions ``label`` raises, and to those ``asked`` for (the Conductor's
    extra_metrics). ``rebuild`` is a zero-argument callable that collects the vector-width
    experiment (``collect_vector_widths`` bound to the candidate), or None where it is not run."""
    answers = []
    for question in choose(label) + [q for q in asked if q not in choose(label)]:
        if question == "loop_dependency":
            answers.append(loop_dependency(mca))
        elif question == "store_bandwidth":
            answers.append(store_bandwidth(traffic, kernel_ms))
        elif question == "wider_vectors":
            if not has_avx512:
                answers.append(_answer(question, "unavailable", "this CPU has no AVX-512: 256 bits is its widest", 0.0))
            elif kernel_ms > MAX_CALL_MS:
                answers.append(
                    _answer(
                        question, "unavailable", f"a call takes {kernel_ms:.0f} ms (limit {MAX_CALL_MS:.0f} ms)", 0.0
                    )
                )
            elif rebuild is None:
                answers.append(
                    _answer(
                        question,
                        "unavailable",
                        f"not run by default (about {REBUILD_COST_S:.0f} s): ask for it with extra_metrics "
                        '["wider_vectors"], or set profile_micro=on',
                        0.0,
                    )
                )
            else:
                answers.append(wider_vectors(rebuild()))
    return answers


def render(answers: list[dict[str, Any]]) -> str:
    """Short lines for the top of the profile: the question, the answer, the cost."""
    lines = []
    for a in answers:
        q = QUESTIONS.get(a["question"], a["question"])
        if a["status"] == "ok":
            cost = "< 0.01 s" if a["cost_s"] < 0.01 else f"{a['cost_s']:.2g} s"
            lines.append(f"micro-profile: {q} {a['answer']} (cost {cost})")
        else:
            lines.append(f"micro-profile: {q} unanswered: {a['answer']}")
    return "\n".join(lines)
