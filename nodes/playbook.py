"""Optimisation guidance that does not depend on a model: the profile's bottleneck, its evidence and
a fixed plan for that bottleneck.

Why: with the embedded 1.5B model each Conductor call took 2-2.5 minutes on 2 cores (0.6-1.7
output tokens/s over a 3-4k-token prompt) and was ~75% of the demo's time, while its advice
mostly restated the profile. ``Context.optimize_advice`` = ``rules`` (the default for the embedded
model) replaces that call with this table: the profiler's classification (``tools/profilers/
bottleneck.py``, the same vocabulary the Conductor model must answer in) picks the plan, the
profile's own evidence and roofline line say why. Larger models keep the Conductor (``model``).

Plans are data, per backend (C++ on CPU, Triton on GPU), worded as instructions to the Coder; a
label without a plan gets the generic one, so the lookup is total.
"""

from __future__ import annotations

import re
from typing import Any

from pragma.tools.profilers.bottleneck import VOCABULARY

GENERIC = "unknown"

CPU_PLANS: dict[str, list[str]] = {
    "memory-bound": [
        "touch each input and output element once: fuse every pass into a single loop over the data",
        "stream with wide vector loads/stores (#pragma omp simd, or AVX2 _mm256 intrinsics on float)",
        "keep temporaries in registers; do not write intermediate arrays",
        "for outputs larger than the last-level cache, use streaming stores (_mm256_stream_ps, "
        "aligned, then _mm_sfence()) so the output lines are not read first",
    ],
    "dram-bound": [
        "cut DRAM traffic: one pass over the data, no intermediate arrays, no re-reads of the inputs",
        "write outputs that are not read again with streaming stores (_mm256_stream_ps on 32-byte "
        "aligned addresses, scalar head and tail, _mm_sfence() at the end): no read-for-ownership",
        "block the loops so data loaded once is reused from cache before it is evicted",
        "use #pragma omp parallel for over the outer loop so more cores pull bandwidth",
    ],
    "cache-resident": [
        "the data fits in cache: the limit is instructions per element, not bandwidth",
        "vectorize the inner loop (8 floats per AVX2 instruction) and unroll it 2-4x",
        "hoist every index computation and branch out of the inner loop",
    ],
    "compute-bound": [
        "vectorize the arithmetic (#pragma omp simd or AVX2 intrinsics) and use fused multiply-add",
        "unroll with several independent accumulators so the FMA latency is hidden",
        "replace divisions and transcendental calls by multiplications or cheaper approximations "
        "that stay inside the tolerance",
    ],
    "not-vectorized": [
        "the hot loop runs scalar instructions: make it vectorizable (unit-stride access, no calls, "
        "no aliasing: mark pointers __restrict__); write selects as x > 0.0f ? x : 0.0f, not "
        "std::max/std::min (under #pragma omp simd g++ turned std::max into a branchy scalar loop, 12x "
        "slower on ReLU), and check the loop without the pragma: -O3 vectorizes plain loops",
        "or write the loop with AVX2 intrinsics (_mm256_loadu_ps, _mm256_max_ps, _mm256_storeu_ps)",
        "handle the remainder elements in a short scalar tail loop",
    ],
    "poor-locality": [
        "access memory in the order it is laid out (innermost loop over the contiguous dimension)",
        "tile the loops so each block of data is reused while it is in L1/L2",
        "transpose or pack an operand once if it is read with a large stride",
    ],
    "bad-speculation": [
        "remove data-dependent branches from the inner loop: use max/min/select (or blend intrinsics) "
        "instead of if/else",
        "split special cases out of the hot loop",
    ],
    "frontend-bound": [
        "shrink the hot loop: fewer instructions per element, no function calls inside it",
        "unroll moderately (2-4x), not aggressively",
    ],
    "latency/overhead-bound": [
        "the call is so short that fixed costs dominate: do all work in one kernel call",
        "avoid per-call allocations or copies in forward beyond the output tensor",
        "do not start threads for small sizes (#pragma omp parallel for if(n > 1 << 16))",
    ],
    GENERIC: [
        "fuse all work into one pass over the data with a vectorized inner loop (#pragma omp simd)",
        "parallelize the outer loop with #pragma omp parallel for",
        "mark pointers __restrict__ and hoist index arithmetic out of the inner loop",
    ],
}

# Steps that only pay with more than one thread: dropped where the run gives the kernel one
# (num_threads=1, the suite's default). Told "parallelize the outer loop with #pragma omp parallel
# for" on a one-thread batch norm, the embedded model added collapse(2) over a loop whose body
# starts with a declaration: three compile errors in a row in both modes (emb1128b).
MULTI_THREAD_STEPS = frozenset(
    {
        CPU_PLANS["dram-bound"][3],
        CPU_PLANS["latency/overhead-bound"][2],
        CPU_PLANS[GENERIC][1],
    }
)

GPU_PLANS: dict[str, list[str]] = {
    "memory-bound": [
        "one kernel, one pass: fuse all elementwise work and load each input once",
        "use larger BLOCK_SIZE (1024-4096) and contiguous, masked tl.load/tl.store",
    ],
    "dram-bound": [
        "cut global-memory traffic: fuse passes, keep intermediates in registers",
        "make loads coalesced: consecutive program elements read consecutive addresses",
    ],
    "cache-resident": [
        "the data is served from cache: reduce instructions per element and launch fewer programs",
    ],
    "compute-bound": [
        "use tl.dot for matrix products, with BLOCK sizes that are multiples of 16",
        "avoid recomputing values inside the loop; accumulate in float32",
    ],
    "latency/overhead-bound": [
        "one launch per forward: fuse everything into one kernel and avoid host-side work",
        "size the grid so each program does enough work",
    ],
    GENERIC: [
        "fuse the work into one kernel with coalesced, masked loads and stores",
        "tune BLOCK_SIZE and num_warps for the problem size",
    ],
}


# glibc's libmvec has vector versions of these float functions; g++ calls them from a
# `#pragma omp simd` loop only when the function is declared SIMD, which glibc's headers do under
# -ffast-math alone (forbidden here). Measured on this machine: a sigmoid loop over 8.2 M floats
# took 50 ms with scalar expf and 6-10 ms with the declaration (_ZGVeN16v_expf, AVX-512); the
# embedded model's verified sigmoid, SiLU and ELU kernels ran at 0.18-0.24x of torch for this reason.
LIBMVEC_FLOAT = (
    "exp",
    "expm1",
    "exp2",
    "log",
    "log1p",
    "log2",
    "log10",
    "erf",
    "erfc",
    "tanh",
    "sinh",
    "cosh",
    "sin",
    "cos",
    "tan",
    "atan",
    "asin",
    "acos",
    "cbrt",
)
_LIBM_CALL = re.compile(r"\b(?:std::)?(" + "|".join(LIBMVEC_FLOAT) + r")f?\s*\(")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def libm_step(code: str) -> str:
    """A plan step for a C++ kernel that calls libm functions glibc can vectorize without declaring
    them SIMD, or '' (already declared, or no such call)."""
    # Calls in comments are not calls (the fast forms' comments say "log(1 + y)").
    names = sorted({m.group(1) for m in _LIBM_CALL.finditer(_COMMENTS.sub(" ", code or ""))})
    if not names or "declare simd" in code:
        return ""
    decls = "\n".join(f"#pragma omp declare simd notinbranch\nfloat {n}f(float);" for n in names)
    block = f'extern "C" {{\n{decls}\n}}\n'
    # The whole file, the declarations after the includes: shown the declarations alone, the embedded
    # model replied with them alone (twice), or pasted them inside its function (ELU, three times).
    includes = list(re.finditer(r"^[ \t]*#[ \t]*include[^\n]*\n", code, re.MULTILINE))
    at = includes[-1].end() if includes else 0
    whole = code[:at] + block + code[at:]
    return (
        f"the loop calls {', '.join(n + 'f' for n in names)} one element at a time (no -ffast-math, so g++ "
        "does not use glibc's vector versions): declare them SIMD above the kernel and keep the call in a "
        "`#pragma omp simd` loop, with no branch around it. Reply with this whole file (your kernel with "
        f"the declarations after the includes):\n```cpp\n{whole.strip()}\n```"
    )


# One element-wise statement over a flat index, as the kernel format's example and formulas write it:
# `for (int64_t i = 0; i < n; ++i) out0[i] = <expression of i>;` (braces optional, with the omp pragma
# line before it, if any). Group names: the pragma line, the index, the bound, the output, the expression.
_MAP_LOOP = re.compile(
    r"(?P<pragma>^[ \t]*#[ \t]*pragma[ \t]+omp[^\n]*\n)?"
    r"(?P<indent>[ \t]*)for\s*\(\s*(?:const\s+)?(?:int64_t|long long|long|size_t|std::size_t|ptrdiff_t|int)\s+"
    r"(?P<i>\w+)\s*=\s*0\s*;\s*(?P=i)\s*<\s*(?P<n>\w+)\s*;\s*(?:\+\+\s*(?P=i)|(?P=i)\s*\+\+)\s*\)\s*"
    r"(?P<open>\{\s*)?(?P<out>\w+)\s*\[\s*(?P=i)\s*\]\s*=\s*(?P<expr>[^;{}]+);(?(open)\s*\})",
    re.MULTILINE,
)

# The streaming form of that loop. Measured on this machine (1000 x 8191 floats, 1 thread, under
# load 2.9): torch.relu 2.25 ms, the plain loop 2.16 ms, this form 1.62 ms; writing each 8-float
# group from a stack array straight to _mm256_stream_ps instead made g++ emit scalar code (7.2 ms).
# So the expression fills a small aligned buffer in a vectorizable loop, and the buffer is streamed.
_STREAMING = """{indent}// Streaming stores: the output is not read back, so its lines skip the read-for-ownership.
{indent}// _mm256_stream_ps needs 32-byte aligned addresses: a scalar head runs until {out} + head is aligned.
{indent}int64_t ps_head = 0;
{indent}while (ps_head < {n} && (reinterpret_cast<uintptr_t>({out} + ps_head) & 31) != 0) {{
{indent}    const int64_t {i} = ps_head;
{indent}    {out}[{i}] = {expr};
{indent}    ++ps_head;
{indent}}}
{indent}const int64_t ps_end = ps_head + ({n} - ps_head) / 8 * 8;
{indent}#pragma omp parallel for
{indent}for (int64_t ps_start = ps_head; ps_start < ps_end; ps_start += 1024) {{
{indent}    alignas(32) float ps_buf[1024];
{indent}    const int64_t ps_m = std::min<int64_t>(1024, ps_end - ps_start);
{indent}    #pragma omp simd
{indent}    for (int64_t ps_j = 0; ps_j < ps_m; ++ps_j) {{
{indent}        const int64_t {i} = ps_start + ps_j;
{indent}        ps_buf[ps_j] = {expr};
{indent}    }}
{indent}    for (int64_t ps_j = 0; ps_j < ps_m; ps_j += 8) _mm256_stream_ps({out} + ps_start + ps_j, _mm256_load_ps(ps_buf + ps_j));
{indent}}}
{indent}_mm_sfence();  // streaming stores are weakly ordered: make them visible before returning
{indent}for (int64_t {i} = ps_end; {i} < {n}; ++{i}) {out}[{i}] = {expr};"""

_STREAM_HEADERS = ("#include <immintrin.h>", "#include <algorithm>", "#include <cstdint>")


def streaming_code(code: str) -> str:
    """``code`` with its element-wise float loop rewritten to streaming stores, or '' where the code
    has no such loop, already streams, writes a non-float output or the machine lacks AVX."""
    if "_stream_" in code:
        return ""
    loop = _MAP_LOOP.search(code)
    if loop is None or re.search(r"\bomp\s+for\b", loop.group("pragma") or ""):
        return ""  # no such loop, or a work-shared loop inside a parallel region the rewrite would nest
    if not _has_avx():  # after the match: it reads /proc/cpuinfo
        return ""
    out = loop.group("out")
    if not re.search(r"\bfloat\s*\*\s*(?:__restrict__\s+|__restrict\s+|restrict\s+)?" + re.escape(out) + r"\b", code):
        return ""  # the buffer and _mm256_stream_ps are float-only
    body = _STREAMING.format(
        indent=loop.group("indent"), i=loop.group("i"), n=loop.group("n"), out=out, expr=loop.group("expr").strip()
    )
    rewritten = code[: loop.start()] + body + code[loop.end() :]
    missing = [h for h in _STREAM_HEADERS if h not in rewritten]
    return "\n".join(missing) + ("\n" if missing else "") + rewritten


def _has_avx() -> bool:
    """Whether this machine's g++ -march=native target has AVX (needed by _mm256_stream_ps)."""
    from pragma.tools import hardware

    return hardware.cpu_spec()["simd"] in ("AVX", "AVX2", "AVX-512")


def streaming_step(code: str, label: str) -> str:
    """A plan step for a memory- or DRAM-bound element-wise kernel: the whole file rewritten with
    streaming stores, or '' where it does not apply.

    Why code and not words: told "use streaming stores (_mm256_stream_ps ...)" five times in a row,
    the embedded model returned the plain loop five times (the demo stayed at 0.95x of torch); shown
    a whole file it copies it (as with the libm declarations).
    """
    if label not in ("memory-bound", "dram-bound"):
        return ""
    rewritten = streaming_code(code)
    if not rewritten:
        return ""
    return (
        "the output is written with ordinary stores, so every output cache line is first read from memory "
        "(read-for-ownership): write it with streaming stores. Reply with this whole file (your loop, its "
        f"output through a small aligned buffer and _mm256_stream_ps):\n```cpp\n{rewritten.strip()}\n```"
    )


def plan_for(label: str, backend: str, num_threads: int = 0) -> list[str]:
    """The fixed steps for a bottleneck label (the generic plan for labels without one), without the
    steps that need more threads where ``num_threads`` is 1 (0: not known)."""
    plans = GPU_PLANS if backend == "gpu" else CPU_PLANS
    steps = plans.get(label) or plans[GENERIC]
    return [s for s in steps if s not in MULTI_THREAD_STEPS] if num_threads == 1 else steps


def guidance_from_profile(
    profile: dict[str, Any],
    best: dict[str, Any],
    speedup: float,
    backend: str,
    no_profile: bool,
    code: str = "",
    num_threads: int = 0,
) -> dict[str, Any]:
    """The Conductor's guidance dict (same keys as the model's), built from the profile alone.

    ``no_profile`` (N-PRAGMA): the Conductor may not read a profile, so the plan is the generic one.
    ``num_threads``: the kernel's thread budget (1: no step that needs more threads).
    """
    label = "unknown" if no_profile else str(profile.get("bottleneck") or "unknown")
    if label not in VOCABULARY:
        label = "unknown"
    evidence = "" if no_profile else str(profile.get("bottleneck_evidence") or "")
    roof = "" if no_profile else _roof_line(profile)
    diagnosis = f"the profile classifies the kernel as {label}" + (f" ({evidence})" if evidence else "")
    if no_profile or label == "unknown":
        diagnosis = f"the candidate runs at {speedup:.2f}x the reference; no profile evidence separates the causes"
    if roof:
        diagnosis += f"; {roof}"
    if best.get("speedup"):
        diagnosis += f"; the best so far is attempt {best.get('iteration', 0)} at {float(best['speedup']):.2f}x"
    steps = plan_for(label, backend, num_threads)
    if backend == "cpu" and (step := libm_step(code)):
        steps = [step, *steps]  # a code fact, whatever the label: it decides the speed of such loops
    elif backend == "cpu" and not no_profile and (step := streaming_step(code, label)):
        # After the libm step, not with it: one rewrite per attempt, and a loop of scalar expf calls
        # is compute-limited until it is vectorized.
        steps = [step, *(s for s in steps if "streaming stores" not in s)]  # the code replaces the words
    text = f"Diagnosis: {diagnosis}\nNext steps:\n" + "\n".join(f"{i + 1}. {s}" for i, s in enumerate(steps))
    return {
        "mode": "optimize",
        "text": text,
        "bottleneck": label,
        "extra_metrics": [],
        # Rules never stop a run: stopping needs judgement the table does not have; max_iterations
        # and the budgets end it.
        "should_stop": False,
        "source": "rules",
    }


def _roof_line(profile: dict[str, Any]) -> str:
    roof = profile.get("roofline") or {}
    pct = roof.get("roofline_pct")
    if roof.get("status") != "ok" or not isinstance(pct, (int, float)):
        return ""
    side = "compute" if roof.get("bound_by") == "compute" else "bandwidth"
    level = f" ({roof['roof_level']})" if roof.get("roof_level") else ""
    if roof.get("above_roof"):  # never an achievement: the roof or the time is wrong (roofline.above_roof)
        return f"{pct:.0f}% of its {side} roof{level}, above the roof: a measurement problem, not a limit reached"
    return f"{pct:.0f}% of its {side} roof{level}"
