"""Repair hints that do not depend on a model: what the verifier found, where, and what to do instead.

Why: a small model in the Conductor's repair role gave advice that made things worse ("use the
`.relu()` method correctly" after a no_torch_compute rejection). Every verifier rule and every
failure status has a fixed instruction here; :func:`repair_hints` renders the one for a failed
verification (with the rule's own finding, which names the line) for the repair guidance and the
Coder's next prompt. The lookup is total: a rule registered later without a specific hint gets a
generic one built from its rationale (``tools/judging/anticheat.py`` RULES), so nothing is ever silent.

Hints are data (as prompts are), worded for both candidate formats; ``KERNEL_NOTES`` adds what
differs when PRAGMA writes the Python glue (candidate_format=kernel).
"""

from __future__ import annotations

import re
from typing import Any

from pragma.tools.judging.anticheat import RULES

# rule -> what to do instead. The verifier's finding ("line 9: calls .relu()") is shown before it.
RULE_HINTS: dict[str, str] = {
    "no_torch_compute": "compute the result in the C++ kernel; in Python use torch only to allocate "
    "(torch.empty, torch.empty_like), .contiguous() and sizes, never an operator, a "
    "tensor method like .relu()/.sum()/.exp(), or arithmetic on tensors",
    "no_library_compute": "remove numpy/scipy/numba/jax: compute in the C++ kernel",
    "has_compiled_kernel": "build a C++ kernel with load_cpp(CPP_SOURCE, name=...) from pragma_cext and call "
    "it in forward; the module must compile its own kernel",
    "compiled_code_ran": "call the compiled kernel from forward on every call (through the library load_cpp "
    "returned); do not compute the output any other way",
    "no_try_fallback": "remove the try/except around the kernel call (or re-raise in the handler); a failing "
    "kernel must fail, not fall back",
    "no_reference_model": "do not subclass, copy or call Model; write ModelNew from scratch around your kernel",
    "no_threads_or_processes": "remove threading/multiprocessing/subprocess; parallelise inside C++ with "
    "#pragma omp parallel for",
    "no_monkeypatching": "do not assign to attributes of torch, time, os.environ or other modules; only "
    "define your own names",
    "no_introspection": "remove gc/inspect/sys._getframe/sys.modules/builtins access; the kernel needs only its inputs",
    "no_dynamic_code": "remove eval/exec/compile/importlib and getattr with computed names; call functions "
    "directly by name",
    "no_tensor_subclass": "return plain tensors from torch.empty; do not subclass torch.Tensor or define "
    "__torch_function__/__torch_dispatch__",
    "plain_dense_output": "return a plain, dense tensor allocated with torch.empty/empty_like (no views with "
    "conj/neg bits, no subclasses, no sparse tensors)",
    "no_precision_downgrade": "keep fp32 data in float (or double) in C++; do not convert to half/bfloat16",
    "no_fast_math": 'remove -ffast-math/-Ofast and #pragma GCC optimize("fast-math"); vectorise with '
    "#pragma omp simd and -O3 instead",
    "fp_environment": "do not change the floating-point environment (no fesetenv, _MM_SET_FLUSH_ZERO_MODE, "
    "torch.set_flush_denormal, crtfastmath)",
    "no_filesystem_writes": "do not open files for writing; load_cpp builds the library for you",
    "no_network": "remove socket/urllib/requests; the kernel computes from its inputs alone",
    "no_state_across_calls": "do not store results between calls (no self.x = ... in forward, no globals, no "
    "caches); compute everything on every call",
    "inputs_unmodified": "never write into an input pointer; write only into the output buffers "
    "(declare inputs const in C++)",
    "fresh_output": "allocate a new output with torch.empty/empty_like on every call and return it; never "
    "return an input, a view of one, or a buffer kept from an earlier call",
    "output_stable": "finish all work before forward returns: no detached threads, async work or deferred "
    "writes after the kernel call",
    "stateless": "do not cache by pointer or shape: compute from the current input values on every call",
    "deterministic": "make reductions deterministic: give each thread a fixed range and combine partial "
    "results in a fixed order instead of atomics",
    "thread_budget": "do not call torch.set_num_threads or omp_set_num_threads or set num_threads(...) in "
    "pragmas; use #pragma omp parallel for and let the verifier choose the thread count",
    "tolerance_discriminates": "nothing to fix in the kernel: the problem's outputs are too small for its "
    "tolerance; report it",
    "speedup_plausible": "the time is below what moving the data at the machine's bandwidth allows: compute "
    "the whole output on every call, do not skip work",
    "no_side_streams": "launch on the current CUDA stream only; remove torch.cuda.Stream and stream contexts",
    "noisy_neighbour": "leave nothing running outside forward: no background threads, timers, signal handlers "
    "or child processes; only OpenMP inside the kernel call",
    "audited_calls": "compute from the current input values on every call: no memo or cache keyed on "
    "pointers, shapes or earlier calls, and the same code path on every call",
    "output_materialised": "write the whole output before forward returns: no protected or unmapped pages "
    "filled later, no work left to fault handlers or threads, and do not make the process non-dumpable",
    "memory_limit": "use less memory: no large temporary buffers per call, allocate only the outputs, and "
    "free what you allocate in C++",
}

# candidate_format=kernel: PRAGMA writes the Python, so a Python-side finding means the C++ must
# change (or, for the glue rules, the C++ did something the glue cannot hide).
KERNEL_NOTES: dict[str, str] = {
    "no_torch_compute": "PRAGMA writes the Python module; write the whole computation in the C++ function",
    "compiled_code_ran": 'PRAGMA calls your C++ function; make sure it is the extern "C" function of the '
    "stated signature and writes the outputs",
    # In kernel format this rule fails only when the reply held no function PRAGMA could wrap (the
    # embedded model, given the libm step, replied with the `declare simd` lines alone, twice).
    "has_compiled_kernel": 'your reply held no C++ function `extern "C" void pragma_kernel(...)`: reply with '
    "the whole source file, the headers and any declarations first, then the function of the stated "
    "signature with its whole body",
}

STATUS_HINTS: dict[str, str] = {
    "compile_error": "g++ rejected the source. Fix the first error it reports (line and message above): "
    "declare every variable, include the headers you use (<cstdint>, <cmath>, <algorithm>), "
    "keep the exact extern \"C\" signature, and end every statement with ';'",
    "runtime_error": "the candidate crashed or raised. Check every index stays inside its tensor (use the "
    "size arguments, not fixed numbers), that loops stop at the last element, and that the "
    "function name and argument list match exactly",
    "mismatch": "the result differs from the reference. Re-read the reference forward() line by line and "
    "compute exactly that (same formula, same reduction dimension, same handling of negative and "
    "zero values); write every output element; accumulate sums in float or double",
    "timeout": "the candidate ran past the time limit. Look for an infinite or O(n^2) loop, wrong loop "
    "bounds (int overflow: use int64_t indices), or a parallel region inside a hot loop",
    "rejected": "a verifier rule rejected the candidate",
}


def rule_hint(rule: str, detail: str = "", fmt: str = "module") -> str:
    """The instruction for one failed rule; generic (from its rationale) when none is written."""
    found = f"{detail.strip()}: " if detail.strip() else ""
    if fmt == "kernel" and rule in KERNEL_NOTES:
        return f"rule {rule}: {found}{KERNEL_NOTES[rule]}."
    if rule in RULE_HINTS:
        return f"rule {rule}: {found}{RULE_HINTS[rule]}."
    registered = RULES.get(rule)
    why = registered.rationale if registered else "the verifier's rule of that name failed"
    return f"rule {rule}: {found}change the code so that this rule passes. Why the rule exists: {' '.join(why.split())}"


# The compiler errors a small model makes most, each with what to do (name quoted as g++ does).
# Seen with the embedded model: a kernel copied from the memory of verified kernels without its
# `int64_t i = 0;` line, repaired four times in a row with the generic hint.
# Python names in C++ (the embedded model wrote `out0[i] = F.elu(x[i], alpha=1.0);` and
# `torch.relu(x[i])`, and, told to "declare `F` before its first use", wrote the same line again).
PYTHON_NAMES = ("torch", "F", "nn", "np", "numpy", "math", "self", "tensor", "functional")
PYTHON_IN_CPP = (
    "`{0}` is Python (PyTorch), and C++ cannot call it: compute the operator's formula element by element "
    "in plain C++ with <cmath> (`torch.relu(v)` becomes `v > 0.0f ? v : 0.0f`, `torch.exp(v)` becomes "
    "`std::exp(v)`, `torch.sigmoid(v)` becomes `1.0f / (1.0f + std::exp(-v))`; named arguments such as "
    "`alpha=1.0` become plain values; a <formulas> section, where the prompt has one, gives the operator as a "
    "C++ function such as `elu_fn(v)`: paste it above the kernel and call it)"
)
_UNDECLARED = re.compile(r"[‘'`](\w+)[’'`] was not declared in this scope")
# g++'s wording for an unknown name in an OpenMP clause (and for unknown parameter types, left alone).
_NOT_BEEN_DECLARED = re.compile(r"[‘'`](\w+)[’'`] has not been declared")
# x86 intrinsics without their header: "'__m256' does not name a type", "'_mm256_loadu_ps' was not
# declared in this scope" (the embedded model, twice in four attempts on an activation; the generic
# "does not name a type" advice below would tell it to delete the line).
_INTRINSIC_NAME = r"(__m(?:64|128|256|512)[dhi]?|__mmask(?:8|16|32|64)|_mm(?:256|512)?_\w+)"
INTRINSICS_FIX = (
    "`{0}` is an x86 intrinsic, declared in <immintrin.h>: add `#include <immintrin.h>` at the top of the file "
    "(or drop the intrinsics: the <formulas> functions are plain C++ that g++ vectorizes to the machine's widest "
    "vectors)"
)
# AVX-512 intrinsics on a machine without AVX-512 (-march=native): g++ refuses to inline them.
NO_AVX512_FIX = (
    "`{0}` needs an instruction set this machine lacks (g++ -march=native): use the _mm256 (AVX2) intrinsics, "
    "or plain C++ loops (the <formulas> functions), which g++ vectorizes to the widest vectors the machine has"
)
COMPILER_FIXES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[‘'`](" + "|".join(PYTHON_NAMES) + r")[’'`] was not declared in this scope"), PYTHON_IN_CPP),
    (
        re.compile(
            rf"[‘'`]{_INTRINSIC_NAME}[’'`] (?:does not name a type|was not declared in this scope|has not been declared)"
        ),
        INTRINSICS_FIX,
    ),
    (
        re.compile(
            r"inlining failed in call to [‘'`]always_inline[’'`] [‘'`][^’'`]*?\b(_mm(?:256|512)?_\w+)\s*\("
            r"[^\n]*target specific option mismatch"
        ),
        NO_AVX512_FIX,
    ),
    (
        re.compile(
            r"[‘'`](?:\w+)[’'`] in namespace [‘'`]std[’'`] does not name a type|[‘'`]\w+[’'`] does not name a type"
        ),
        "the line named above is not a C++ statement where it stands (text copied from a comment, or code "
        "outside any function): delete it, or turn it into a `//` comment",
    ),
    (
        _UNDECLARED,
        "declare `{0}` before its first use (a loop index: `int64_t {0} = 0;` before the loop, "
        "or `for (int64_t {0} = 0; ...)`)",
    ),
    (re.compile(r"expected [‘'`];[’'`]"), "add the missing `;` at the end of the statement named above"),
    # The embedded model, refining a batch norm, put collapse(2) over a channel loop whose body
    # starts with a declaration: four compile errors in a row (g++ then also reports the loop index
    # as undeclared, and that advice would be wrong).
    (
        re.compile(r"not enough (?:for |perfectly nested )?loops to collapse"),
        "`collapse(N)` needs N `for` loops nested directly under the pragma with nothing between them: remove "
        "the `collapse(...)` clause and keep `#pragma omp parallel for` on the outer loop",
    ),
    # The embedded model, refining a batch norm, added `reduction(* : out0)` over the output loop
    # three times in a row (emb1128b): the generic advice said nothing about the clause.
    (
        re.compile(r"user defined reduction not found for [‘'`](\w+)[’'`]"),
        "`reduction(... : {0})` names `{0}`, an array or pointer: a reduction clause takes scalar "
        "accumulators only, and a loop that writes `{0}[i]` element by element needs none: remove that clause",
    ),
    # `#pragma omp parallel for simd` over a row loop with another one over its inner loop (ELU, emb1128b).
    (
        re.compile(r"OpenMP constructs other than [^\n]*? may not be nested inside [‘'`]simd[’'`] region"),
        "an OpenMP pragma stands inside a loop that already carries `simd`: keep `#pragma omp parallel for` "
        "on the outer loop alone (no `simd` there) and at most `#pragma omp simd` on the innermost loop",
    ),
    (re.compile(r"redefinition of [‘'`]([^’'`]+)[’'`]"), "define `{0}` once: remove or rename the second definition"),
    (
        re.compile(r"invalid conversion from [‘'`]([^’'`]+)[’'`] to [‘'`]([^’'`]+)[’'`]"),
        "convert explicitly: `static_cast<{1}>(...)` where a `{0}` is passed",
    ),
)


# An undeclared variable named in an OpenMP reduction clause: the embedded model added
# `reduction(+:sum)` to an element-wise loop that has no sum; declaring it is not the fix.
UNDECLARED_REDUCTION = (
    "the `reduction(...)` clause names `{0}`, which is not declared: a loop that only writes outputs "
    "element by element needs no reduction clause (remove it); a real reduction declares `{0}` before the loop"
)
# An undeclared name in another clause of an OpenMP pragma: `private(x_i)`, `private(i)`,
# `collapse(TILE)` (gelu_erf, emb1128b: the loop-index advice sent the model to declare them).
UNDECLARED_IN_PRAGMA = (
    "the `#pragma omp` line names `{0}` in a clause, and `{0}` is not declared there: remove that clause "
    "(a loop whose iterations write separate output elements needs no `private`, `shared` or `collapse`: "
    "`#pragma omp parallel for simd` alone)"
)
# One of PRAGMA's fast forms, called before the model's own definition of it further down: PRAGMA
# leaves a kernel's own form alone, so none was added (the embedded model on leaky_relu, emb1128b:
# its own `leaky_relu_fn` below the kernel, wrong too, the same file five times).
OWN_FAST_FORM = (
    "`{0}` is one of PRAGMA's fast forms: delete your own definition of `{0}` (below the kernel, where the "
    'call cannot see it) and keep `#include "pragma_fast.h"`; PRAGMA then adds its correct, vectorizable `{0}`'
)
# An undeclared name used as a function (`inv_sqrt(v)`): the loop-index advice would be wrong.
UNDECLARED_FUNCTION = (
    "`{0}(...)` calls a function that does not exist: write its math inline (`1.0f / std::sqrt(v)`, "
    "`std::exp(v)`, `std::max(a, b)`) or define `{0}` above pragma_kernel"
)


# tools/judging/compare.py's wording when a candidate produced NaN or Inf where the reference has numbers.
NAN_WHERE_FINITE = "NaN/Inf where the reference is finite"
# The embedded model took sqrt(sum of x) for an L2 norm three times: NaN for every row with a
# negative sum, and the plain mismatch advice never said where NaN comes from.
NAN_HINT = (
    "your kernel produced NaN or Inf where the reference has numbers: look for a square root or log of a value "
    "that can be negative (a sum of values instead of a sum of squares), a division by zero, or exp of a large "
    "value without subtracting the maximum first"
)


# The dynamic loader's wording for a function the .so declares but never defines. The embedded model
# (make demo, ReLU, attempt 1) pasted pragma_kernel's signature from the prompt and ended it with `;`:
# the library compiled and linked (a shared library may leave symbols undefined) and failed to load.
_UNDEFINED_SYMBOL = re.compile(r"undefined symbol: (\w+)")
UNDEFINED_SYMBOL_HINT = (
    "`{0}` is declared but has no body: the code gives its signature and ends it with `;`. Write the "
    "function: replace that `;` by `{{ ... }}` holding the loop that writes every output element"
)


# tools/judging/compare.py's wording when only the first rows of an output are right.
FIRST_ROWS_ONLY = "rows match, every later row differs"
# The second sentence: a group norm whose outer loop bound the embedded model cut from `N * G` to `N`
# (emb1128b) read the row-loop advice alone and kept its bound for three repairs.
ROW_LOOP_HINT = (
    "your kernel computes the first row(s) only: the row-wise statements must run once per row, inside "
    "`for (int64_t r = 0; r < rows; ++r) { const float* row = x + r * n; float* out = out0 + r * n; ... }` "
    "(rows: the product of every dim but the last, n: the last dim). Where <formulas> gives the whole body "
    "(a group or channel norm), its outer loop already covers every output: paste that loop with its bound "
    "unchanged (e.g. `N * G`, every sample's every group)"
)


def compiler_fix(error_line: str, source_line: str = "") -> str:
    """The specific fix for a known compiler error, or ''. ``source_line``: the line g++ quotes."""
    m = _UNDECLARED.search(error_line) or _NOT_BEEN_DECLARED.search(error_line)
    if m and re.search(rf"reduction\s*\([^)]*\b{re.escape(m.group(1))}\b", source_line):
        return UNDECLARED_REDUCTION.format(m.group(1))
    if m and re.match(r"#\s*pragma\s+omp\b", source_line) and re.search(rf"\b{re.escape(m.group(1))}\b", source_line):
        return UNDECLARED_IN_PRAGMA.format(m.group(1))
    for pattern, fix in COMPILER_FIXES:
        if m := pattern.search(error_line):
            if pattern is _UNDECLARED and re.search(rf"\b{re.escape(m.group(1))}\s*\(", source_line):
                from pragma.knowledge.fast_forms import PROVIDED

                return (OWN_FAST_FORM if m.group(1) in PROVIDED else UNDECLARED_FUNCTION).format(m.group(1))
            return fix.format(*m.groups())
    return ""


# g++'s context line before an error inside a function: "In function ‘void debug_check(const float*)’:".
_IN_FUNCTION = re.compile(r"In function [‘'`](?:[^’'`(]*?[\s*&])?(\w+)\(")
# The embedded model appended a `debug_check` function to its rms_norm kernel, with undeclared
# names in it, and kept it for three repairs (emb1128b): the loop-index advice sent it to declare them.
EXTRA_FUNCTION = (
    "the first error is in `{0}`, not in pragma_kernel: delete `{0}` unless pragma_kernel calls it "
    "(PRAGMA calls pragma_kernel alone and checks its output itself)"
)


def _error_source_line(text: str, error_line: str) -> str:
    """The source line g++ quotes under ``error_line`` (`   13 |     code`), stripped, or ''."""
    m = re.search(r":(\d+):\d+:", error_line)
    if not m:
        return ""
    quoted = re.search(rf"^\s*{m.group(1)} \|(.*)$", text, re.MULTILINE)
    return quoted.group(1).strip()[:160] if quoted else ""


def _first_compiler_error(text: str) -> str:
    for line in text.splitlines():
        if re.search(r"\berror\b", line, re.IGNORECASE) and ".cpp:" in line:
            return line.strip()[:300]
    return next((ln.strip()[:300] for ln in text.splitlines() if "error" in ln.lower()), "")


# The embedded model, given silu's whole body (`out0[i] = silu_fn(x[i]);`), wrote its own sigmoid
# instead, wrong, in both modes (emb1128b; probe p3 too): the generic mismatch advice never said so.
UNUSED_FORM_HINT = (
    "your kernel does not call `{0}`: it computes the operator itself, and wrongly. Use the body <formulas> "
    'gives, `{0}(...)` for every element, and keep `#include "pragma_fast.h"` (PRAGMA adds `{0}`)'
)


def unused_form_hint(result: dict[str, Any], candidate: dict[str, Any]) -> str:
    """A hint line for a mismatch whose kernel does not call the fast form of the body it was given
    (``candidate["given_call"]``, set by the Coder), or ''."""
    call = candidate.get("given_call") or ""
    # A call, not a declaration of it (`float gelu_fn(float v);` in the kernel calls nothing).
    called = re.search(rf"(?<!float )\b{call}\s*\(", candidate.get("kernel") or "")
    if result.get("status") != "mismatch" or not call or called:
        return ""
    return f"- {UNUSED_FORM_HINT.format(call)}."


def candidate_hints(result: dict[str, Any], candidate: dict[str, Any], fmt: str | None = None) -> str:
    """Every fixed hint for ``candidate``'s failed verification: the unused-form line (which needs the
    candidate, not only the result) first, then ``repair_hints`` in its format (or ``fmt``)."""
    fixed = repair_hints(result, fmt or candidate.get("format", "module"))
    return "\n".join(h for h in (unused_form_hint(result, candidate), fixed) if h)


def repair_hints(result: dict[str, Any], fmt: str = "module") -> str:
    """Fixed instructions for a failed verification (empty string for a passing one)."""
    status = result.get("status", "")
    if status in ("", "ok"):
        return ""
    lines: list[str] = []
    failed = [c for c in result.get("checks") or [] if c.get("verdict") == "fail"]
    if status == "rejected" or failed:
        for check in failed or [_rule_from_message(result.get("message", ""))]:
            if check:
                lines.append(rule_hint(check["rule"], check.get("detail", ""), fmt))
    if status != "rejected" or not lines:
        first = source = ""
        if status == "compile_error":
            log = f"{result.get('message', '')}\n{result.get('log_tail', '')}"
            first = _first_compiler_error(log)
            source = _error_source_line(log, first)
        elif status in ("runtime_error", "mismatch", "timeout"):
            first = (result.get("message") or "").strip().splitlines()[0][:300] if result.get("message") else ""
        hint = STATUS_HINTS.get(status, f"the verifier reported {status}")
        if status == "mismatch" and NAN_WHERE_FINITE in (result.get("message") or ""):
            hint = f"{NAN_HINT}; {hint}"
        elif status == "mismatch" and FIRST_ROWS_ONLY in (result.get("message") or ""):
            hint = f"{ROW_LOOP_HINT}; {hint}"
        elif status == "runtime_error" and (m := _UNDEFINED_SYMBOL.search(result.get("message") or "")):
            hint = f"{UNDEFINED_SYMBOL_HINT.format(m.group(1))}; {hint[0].lower()}{hint[1:]}"
        if status == "compile_error" and (fix := compiler_fix(first, source)):
            hint = f"{fix}; {hint[0].lower()}{hint[1:]}"
            if source:
                first = f"{first} (the line: `{source}`)"
        if status == "compile_error" and fmt == "kernel" and (m := _IN_FUNCTION.search(log)):
            if m.group(1) != "pragma_kernel":
                hint = f"{EXTRA_FUNCTION.format(m.group(1))}; {hint[0].lower()}{hint[1:]}"
        lines.append(f"{status}: {first + ' — ' if first else ''}{hint}.")
    return "\n".join(f"- {line}" for line in dict.fromkeys(lines))


def _rule_from_message(message: str) -> dict[str, str] | None:
    m = re.match(r"rule (\w+): (.*)", message, re.DOTALL)
    return {"rule": m.group(1), "detail": m.group(2)[:300]} if m else None
