"""What common PyTorch operators compute, element by element, for the Coder's prompt.

Why: a kernel-format candidate must write the operator's math in C++, and a small model often does
not know it. The embedded 1.5B model, given ``return F.elu(x, alpha=1.0)``, wrote
``max(0, x) + exp(x - 1) / 2``, then ``exp(x)``, then ``exp(x) - 1``: five mismatches in a row for
a one-line formula. The prompt now carries the definition of every operator the problem's source
names, so the model transcribes a formula instead of recalling one. Written by the project from
PyTorch's documentation (default arguments as PyTorch's), in C++ notation; tests/test_formulas.py
compiles each element-wise entry with g++ and compares it with torch.

``lookup(source)`` finds the operators a problem names (``F.elu(``, ``torch.sigmoid(``,
``x.relu(``, ``nn.LayerNorm(``) and returns their entries, in order of first mention.
"""

from __future__ import annotations

import re
from typing import TypedDict

from pragma.knowledge.operators import ALIASES, ELEMENTWISE, _snake, cpp_function, cpp_name  # noqa: F401 - used here; callers also reach them as formulas.X
from pragma.knowledge.reductions import EXP_NEG

# Extra words after an element-wise definition.
NOTES: dict[str, str] = {
    "gelu": "approximate='tanh': 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))",
}
# Normalizations over channels (dim 1) and the positions after it, as the whole body of a kernel
# in generic names: `x` (the input, sizes x_dim0, x_dim1, ...), `out0`, `weight` and `bias` (one
# value per channel), HW (the positions per sample and channel: the product of the dims after 1)
# and GROUPS (num_groups) are replaced by the signature's names and the problem's values
# (channel_body). Why whole bodies: in words ("per channel over the batch and every position"),
# the embedded model wrote five kernels for group_norm that did not compile and five for
# batch_norm that did not match. tests/test_formulas.py compiles each with g++ against torch.
_GROUPED = """const int64_t N = x_dim0, C = x_dim1, hw = HW;  // hw: positions per sample and channel
const int64_t G = GROUPS;  // the number of groups
const int64_t m = C / G * hw;  // the values of one sample's group: contiguous
const float eps = 1e-5f;  // PyTorch's default
#pragma omp parallel for
for (int64_t bg = 0; bg < N * G; ++bg) {
    const float* in = x + bg * m;
    float* out = out0 + bg * m;
    const int64_t c0 = bg % G * (C / G);  // the group's first channel
    // One pass: the sums of d = v - shift and d * d per channel in float vector lanes (omp simd:
    // g++ keeps one partial sum per lane), each channel's added up in double. The shift (the
    // group's first value) keeps the variance from cancelling when the mean is far from 0.
    const float shift = in[0];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t c = 0; c < C / G; ++c) {
        const float* p = in + c * hw;
        float a = 0.0f, b = 0.0f;
        #pragma omp simd reduction(+ : a, b)
        for (int64_t i = 0; i < hw; ++i) {
            const float d = p[i] - shift;
            a += d;
            b += d * d;
        }
        s1 += a;
        s2 += b;
    }
    const double dm = s1 / m;  // mean - shift
    const float mean = (float)(shift + dm);
    const float rstd = (float)(1.0 / std::sqrt(std::max(s2 / m - dm * dm, 0.0) + eps));  // biased variance
    for (int64_t c = c0; c < c0 + C / G; ++c) {
        const float* p = in + (c - c0) * hw;
        float* q = out + (c - c0) * hw;
        const float a = rstd * weight[c];
        for (int64_t i = 0; i < hw; ++i) q[i] = (p[i] - mean) * a + bias[c];
    }
}"""
CHANNEL_BODIES: dict[str, str] = {
    "batch_norm": """const int64_t N = x_dim0, C = x_dim1, hw = HW;  // hw: positions per sample and channel
const float eps = 1e-5f;  // PyTorch's default
const double count = (double)N * hw;
// Training mode (a module's default): each channel's statistics over the batch and every position.
// In eval mode (model.eval()) mean and var are the module's running_mean[c] and running_var[c].
#pragma omp parallel for
for (int64_t c = 0; c < C; ++c) {
    // One pass: the sums of d = v - shift and d * d per sample in float vector lanes (omp simd: g++
    // keeps one partial sum per lane), each sample's added up in double; the shift keeps the
    // variance from cancelling when the mean is far from 0.
    const float shift = x[c * hw];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t b = 0; b < N; ++b) {
        const float* p = x + (b * C + c) * hw;
        float a = 0.0f, q = 0.0f;
        #pragma omp simd reduction(+ : a, q)
        for (int64_t i = 0; i < hw; ++i) {
            const float d = p[i] - shift;
            a += d;
            q += d * d;
        }
        s1 += a;
        s2 += q;
    }
    const double dm = s1 / count;  // mean - shift
    const float mean = (float)(shift + dm);
    const float rstd = (float)(1.0 / std::sqrt(std::max(s2 / count - dm * dm, 0.0) + eps));  // biased variance
    const float a = rstd * weight[c];
    for (int64_t b = 0; b < N; ++b) {
        const float* p = x + (b * C + c) * hw;
        float* q = out0 + (b * C + c) * hw;
        for (int64_t i = 0; i < hw; ++i) q[i] = (p[i] - mean) * a + bias[c];
    }
}""",
    "group_norm": _GROUPED,
    # One group per channel; affine=False by default (no weight or bias arguments then).
    "instance_norm": _GROUPED.replace("GROUPS;  // the number of groups", "C;  // one group per channel"),
}
# EXP_NEG (defined once, in knowledge/reductions.py): exp(v) for v <= 0 (softmax's v - max) in
# float, branch-free, so g++ vectorizes the loop that calls it: v = k ln2 + f with |f| <= ln2/2 (k rounded by the 1.5 * 2^23 trick, which vectorizes where
# std::round does not), exp(f) by Cephes' degree-6 polynomial (about 1 ulp), times 2^k built in
# the exponent bits. Below -87 the result is clamped to ~1e-38 instead of 0 (torch: 0 or a
# denormal; the difference is below any tolerance). Why not std::exp: g++ calls glibc's scalar
# expf once per element (no vector code without -ffast-math), the 0.08x-0.3x softmax kernels.
# The largest of a row in 16 float lanes (g++: vector max), for softmax and log_softmax.
_ROW_MAX = """float m = row[0];
#pragma omp simd reduction(max : m)
for (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;"""


def _lanes(acc: str, term: str) -> str:
    """A row reduction: the float ``acc``, the sum over j of ``term``, in vector lanes. Why omp simd
    and not 16 hand-written partial sums: g++ 12 turned an ``acc[16]`` array into a tangle of scalar
    adds and permutes (layer norm 0.48x of torch), while ``#pragma omp simd reduction`` gives one
    vector of partial sums (16 lanes with AVX-512); each lane adds up n / 16 values, within the 1e-4
    tolerance at the suite's row lengths."""
    return f"""float {acc} = 0.0f;
#pragma omp simd reduction(+ : {acc})
for (int64_t j = 0; j < n; ++j) {acc} += {term};"""


# Operators computed over the last dim of a 2-D input (or dim=-1), one row at a time: their
# kernel-format system prompt shows a row loop (nodes/coder.py), not the element-wise example, and
# the prompt gives each as C++ statements for one row. Why C++ and not only words: with the row
# loop and "norm = sqrt(sum over dim of v * v)" in words, the embedded model kept the example's
# row sum and changed one detail per repair (sum of |v|, then its square root): four mismatches.
# The statements read `row` (the input row), write `out` (the output row) and use `n` (the row
# length); tests/test_formulas.py compiles each inside a row loop and compares it with torch.
# They are fast forms (issue 31): float reductions in vector lanes, a vectorizable exp, few passes over
# a row that stays in L1/L2; the correct-first forms (scalar double sums, std::exp) ran at 0.08x-1x
# of torch. eval/bench_fast_rows.py measures each against torch at 1 thread.
ROW_BODIES: dict[str, str] = {
    "softmax": f"""{EXP_NEG}
{_ROW_MAX}
float s = 0.0f;  // exp(v - m), stored in out and summed in vector lanes
#pragma omp simd reduction(+ : s)
for (int64_t j = 0; j < n; ++j) {{
    const float e = exp_neg(row[j] - m);
    out[j] = e;
    s += e;
}}
const float inv = 1.0f / s;
for (int64_t j = 0; j < n; ++j) out[j] *= inv;""",
    "log_softmax": f"""{EXP_NEG}
{_ROW_MAX}
{_lanes("s", "exp_neg(row[j] - m)")}
const float lse = m + std::log(s);
for (int64_t j = 0; j < n; ++j) out[j] = row[j] - lse;""",
    "layer_norm": """const float eps = 1e-5f;  // nn.LayerNorm's default; weight and bias: the module's, n values each
// One pass over the row: sums of d = v - shift and d * d (the shift, the row's first value, keeps
// the variance from cancelling when the mean is far from 0).
const float shift = row[0];
float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
for (int64_t j = 0; j < n; ++j) {
    const float d = row[j] - shift;
    s1 += d;
    s2 += d * d;
}
const float dm = s1 / n;  // mean - shift
const float mean = shift + dm;
const float rstd = 1.0f / std::sqrt(std::max(s2 / n - dm * dm, 0.0f) + eps);
for (int64_t j = 0; j < n; ++j) out[j] = (row[j] - mean) * rstd * weight[j] + bias[j];""",
    "rms_norm": f"""const float eps = 1.1920929e-07f;  // F.rms_norm's default (float32 epsilon); weight: n values
{_lanes("q", "row[j] * row[j]")}
const float rstd = 1.0f / std::sqrt(q / n + eps);
for (int64_t j = 0; j < n; ++j) out[j] = row[j] * rstd * weight[j];""",
    "normalize": f"""const float eps = 1e-12f;  // F.normalize(p=2.0, dim=1)'s default
{_lanes("q", "row[j] * row[j]")}
const float inv = 1.0f / std::max(std::sqrt(q), eps);
for (int64_t j = 0; j < n; ++j) out[j] = row[j] * inv;""",
    "mean": f"""// x.mean(dim=-1): one value per row (keepdim=True: it broadcasts over the row)
{_lanes("s", "row[j]")}
const float mean = s / n;""",
}
ROW_WISE = frozenset(ROW_BODIES)


def _definition(name: str) -> str:
    if name in ELEMENTWISE:
        signature, expr = ELEMENTWISE[name]
        return f"{signature} = {expr}" + (f"; {NOTES[name]}" if name in NOTES else "")
    return ROW_BODIES.get(name) or CHANNEL_BODIES[name]


FORMULAS: dict[str, str] = {name: _definition(name) for name in (*ELEMENTWISE, *ROW_BODIES, *CHANNEL_BODIES)}

# F.elu( / torch.sigmoid( / torch.nn.functional.gelu( / x.relu( / nn.LayerNorm( / torch.special.erf( /
# x.pow(2).mean(
_CALL = re.compile(r"(?:\b(?:F|torch|functional|nn|special)\.|[\w)\]]\.)([A-Za-z_][A-Za-z0-9_]*)\s*\(")


# Operators a problem writes out instead of calling: name -> (a test on the source, the parts it
# stands for). The suite's rms_norm is `x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
# * self.weight`; shown rsqrt and the row mean, the embedded model wrote 1/sqrt(sum of squares)
# five times (no mean, no eps, no weight). A mean of squares over a kept dim under a square root is
# an RMS norm, whatever multiplies it.
_MEAN_OF_SQUARES = re.compile(r"(?:\.pow\(\s*2(?:\.0)?\s*\)|\*\*\s*2(?:\.0)?\s*\)|\.square\(\s*\))\s*\.mean\(")
SPELLED_OUT: dict[str, tuple[re.Pattern[str], tuple[str, ...]]] = {
    "rms_norm": (
        re.compile(rf"(?=[\s\S]*{_MEAN_OF_SQUARES.pattern})(?=[\s\S]*keepdim\s*=\s*True)(?=[\s\S]*\br?sqrt\()"),
        ("rsqrt", "sqrt", "mean"),
    ),
}


def lookup(source: str) -> list[tuple[str, str]]:
    """(name, definition) for every operator of FORMULAS that ``source`` calls, first mention first;
    an operator it writes out (SPELLED_OUT) stands in for its parts, where the first of them was.
    Only Model's __init__ and forward count where the source has them: KernelBench's KL-divergence
    problem draws its inputs with ``.softmax(dim=-1)`` in get_inputs, which is no operator to write."""
    from pragma.knowledge.reductions import model_code

    source = model_code(source) or source
    found: dict[str, str] = {}
    for m in _CALL.finditer(source):
        raw = m.group(1)
        for key in (raw.lower(), _snake(raw)):
            name = key if key in FORMULAS else ALIASES.get(key, "")
            if name:
                found.setdefault(name, FORMULAS[name])
                break
    for name, (test, parts) in SPELLED_OUT.items():
        if name not in found and test.match(source):
            items = list(found.items())
            at = next((i for i, (key, _) in enumerate(items) if key in parts), len(items))
            items.insert(at, (name, FORMULAS[name]))
            found = {key: text for key, text in items if key not in parts}
    return list(found.items())


class LoopNames(TypedDict):
    """The kernel signature's names a row or channel loop is written in (nodes/coder.py reads them
    from the kernel spec)."""

    x: str  # the input the operator reads (its sizes are x_dim0, x_dim1, ...)
    ndim: int  # that input's number of dims: rows are every dim but the last; channels are dim 1
    out: str  # the output it writes
    weight: str  # the per-column (row-wise) or per-channel weight argument ('' when there is none)
    bias: str  # the same for the bias ('' when there is none)


DEFAULT_NAMES = LoopNames(x="x", ndim=2, out="out0", weight="weight", bias="bias")


_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?"


def eps_of(source: str) -> str:
    """The epsilon the problem passes (``eps=1e-6`` in a call, a module constant ``eps = 1e-6``, or
    the number added to a kept-dim mean: ``.mean(-1, keepdim=True) + 1e-6``), or ''. Why: an RMS norm
    with PyTorch's default eps (1.2e-7) instead of the problem's 1e-6 passes on unit-scale inputs and
    fails on the verifier's x1e-3 inputs, where the mean of squares is about eps itself."""
    m = re.search(rf"\beps\s*=\s*({_NUMBER})", source) or re.search(
        rf"keepdim\s*=\s*True\s*\)\s*\+\s*({_NUMBER})\b", source
    )
    return m.group(1) if m else ""


def groups_of(source: str) -> str:
    """num_groups as the problem states it (``nn.GroupNorm(16, 128)``, ``nn.GroupNorm(groups, ...)``
    with a module constant ``groups = 16``, ``F.group_norm(x, 16)``), or ''."""
    m = re.search(r"GroupNorm\(\s*(?:num_groups\s*=\s*)?(\w+)", source) or re.search(
        r"group_norm\(\s*\w+\s*,\s*(?:num_groups\s*=\s*)?(\w+)", source
    )
    if not m:
        return ""
    if m.group(1).isdigit():
        return m.group(1)
    constant = re.search(rf"^{re.escape(m.group(1))}\s*=\s*(\d+)\s*$", source, re.MULTILINE)
    return constant.group(1) if constant else ""


def _fit(body: str, names: LoopNames, eps: str) -> tuple[str, list[str]]:
    """(body with the problem's eps and without absent weight/bias, alias lines for weight/bias)."""
    if eps:  # the problem's epsilon instead of PyTorch's default
        body = re.sub(
            r"^const float eps = [^;]+;[^\n]*",
            f"const float eps = {float(eps)!r}f;  // forward()'s eps",
            body,
            flags=re.M,
        )
    aliases = []
    for arg in ("weight", "bias"):
        if not re.search(rf"\b{arg}\[", body):
            continue
        if not names[arg]:  # the problem has no such argument: the operator runs without it
            body = re.sub(rf"\s*[*+]\s*{arg}\[\w+\]", "", body)
        elif names[arg] != arg:
            aliases.append(f"const float* {arg} = {names[arg]};  // the signature's {names[arg]}")
    return body, aliases


def row_loop(name: str, names: LoopNames = DEFAULT_NAMES, eps: str = "") -> str:
    """``name``'s statements inside the whole row loop, in the signature's names: a body to paste
    into pragma_kernel. Why the loop and not only the statements: given the statements for one row
    "inside the row loop of the example", the embedded model pasted them straight into the function
    body three times for layer_norm (row 0 right, every other row unwritten)."""
    x, d = names["x"], max(int(names["ndim"]), 1)
    body, aliases = _fit(ROW_BODIES[name], names, eps)
    rows = " * ".join(f"{x}_dim{i}" for i in range(d - 1)) or "1"
    lines = [
        f"// {name}: one row of {x} (its last dim) per iteration of r",
        f"const int64_t n = {x}_dim{d - 1};  // the row length",
        f"const int64_t rows = {rows};  // the number of rows",
        *aliases,
        "#pragma omp parallel for",
        "for (int64_t r = 0; r < rows; ++r) {",
        f"    const float* row = {x} + r * n;  // the input row",
        f"    float* out = {names['out']} + r * n;  // the output row",
        *(f"    {line}" for line in body.splitlines()),
    ]
    if not re.search(r"\bout\[j\]\s*=", body):
        lines.append("    // then write out[j] for every j < n from row[j] and the value above")
    return "\n".join([*lines, "}"])


def channel_body(name: str, names: LoopNames = DEFAULT_NAMES, eps: str = "", groups: str = "") -> str:
    """A channel normalization (CHANNEL_BODIES) as the whole body of pragma_kernel, in the
    signature's names, with the problem's eps and num_groups."""
    body, aliases = _fit(CHANNEL_BODIES[name], names, eps)
    x, d = names["x"], max(int(names["ndim"]), 2)
    body = body.replace("HW", " * ".join(f"x_dim{i}" for i in range(2, d)) or "1")
    body = body.replace("GROUPS;  // the number of groups", f"{groups};  // num_groups" if groups else "num_groups;")
    if x != "x":
        body = re.sub(r"\bx(?=_dim|\b)", x, body)
    if names["out"] != "out0":
        body = re.sub(r"\bout0\b", names["out"], body)
    return "\n".join([f"// {name} over the channels (dim 1) of {x}", *aliases, body])


def render(source: str, names: LoopNames = DEFAULT_NAMES, spec: dict | None = None) -> str:
    """The element-wise operators the problem names as C++ functions (one fenced block), the
    row-wise and channel ones as whole kernel bodies in the signature's ``names``, the reductions,
    losses, pooling and scans of knowledge/reductions.py as whole bodies for the kernel ``spec``
    (tools/glue.kernel_spec), or '' when it names none these tables know."""
    found = lookup(source)
    extra = reduction_bodies(source, spec)
    if extra:  # a reduction over a dim, written for the signature, not the row loop's row mean
        found = [(name, text) for name, text in found if name != "mean"]
    if spec and not _same_shape_out(spec):  # a row or channel body writes an output shaped as its input
        found = [(name, text) for name, text in found if name not in CHANNEL_BODIES and name not in ROW_BODIES]
    elementwise = [name for name, _ in found if name in ELEMENTWISE]
    parts = []
    if elementwise:
        # The fast forms (knowledge/fast_forms.py), with the kernel's whole loop where the problem is
        # that one operator alone.
        from pragma.knowledge import fast_forms

        alone = not extra and not any(name in ROW_BODIES or name in CHANNEL_BODIES for name, _ in found)
        # With a kernel spec (kernel format) the forms are named on PRAGMA's include line and
        # tools/glue.py defines the ones a kernel calls.
        parts.append(
            fast_forms.prompt_part(
                elementwise, source, names["x"], names["ndim"], names["out"], alone, provided=spec is not None
            )
        )
    eps = eps_of(source)
    bodies = [
        row_loop(name, names, eps) if name in ROW_BODIES else channel_body(name, names, eps, groups_of(source))
        for name, _ in found
        if name in ROW_BODIES or name in CHANNEL_BODIES
    ]
    bodies += [text for _, text in extra]
    if bodies:
        text = "\n".join(bodies)
        provided: list[str] = []
        if spec is not None:  # kernel format: tools/glue.py adds the bodies' exp_neg/log_f as functions
            from pragma.knowledge import fast_forms

            text, provided = fast_forms.without_lambdas(text)
        parts.append(
            "The operator as the whole body of pragma_kernel, in your signature's names: paste it into your"
            " function and use the values forward() passes where they differ from the defaults:"
            "\n```cpp\n" + text + "\n```"
        )
        if provided:
            parts.append(
                ", ".join(f"`{name}(v)` ({fast_forms.LAMBDA_NOTES[name]})" for name in dict.fromkeys(provided))
                + ": vectorizable float functions PRAGMA adds to your file before compiling it; call them, do"
                " not write them."
            )
    return "\n".join(parts)


def _same_shape_out(spec: dict) -> bool:
    """Whether the kernel's first output has its first input's shape."""
    args = spec.get("args") or []
    first = next((a for a in args if a["role"] == "input"), None)
    out = next((a for a in args if a["role"] == "output"), None)
    return bool(first and out and first.get("shape") == out.get("shape"))


def reduction_bodies(source: str, spec: dict | None) -> list[tuple[str, str]]:
    """(name, body) for each operator of knowledge/reductions.py the problem names whose body fits
    the kernel ``spec``; none without a spec, and none where a row or channel body already gives
    the problem's operator (an RMS norm's inner mean is that norm's)."""
    from pragma.knowledge import reductions

    if not spec or any(name in CHANNEL_BODIES or (name in ROW_BODIES and name != "mean") for name, _ in lookup(source)):
        return []
    found = [(name, reductions.body(name, source, spec)) for name in reductions.find(source)]
    return [(name, text) for name, text in found if text]


def gives_whole_body(source: str, spec: dict | None = None) -> bool:
    """Whether the kernel prompt's <formulas> gives pragma_kernel's whole body: a row, channel or
    reduction loop, or the loop over every element for one element-wise operator whose arguments
    are certain (what ``render`` writes as "whole body")."""
    return loop_bodied(source, spec) or bool(elementwise_call(source))


def elementwise_call(source: str) -> str:
    """The fast form's function (``silu_fn``) where the problem is one element-wise operator whose
    call's arguments are certain, so the whole body <formulas> gives calls it; '' otherwise."""
    found = [name for name, _ in lookup(source)]
    from pragma.knowledge import fast_forms

    call = fast_forms.call_arguments(found[0], source) if len(found) == 1 and found[0] in ELEMENTWISE else None
    return call[0] if call else ""


def loop_bodied(source: str, spec: dict | None = None) -> bool:
    """Whether the problem names an operator its prompt gives as a whole loop (over rows or over
    channels, or a reduction written for the kernel ``spec``): its kernel system prompt shows a
    reduce-then-write loop, not the element-wise one (the embedded model, shown the element-wise
    ReLU example beside batch_norm's body, wrote a ReLU)."""
    return any(name in ROW_BODIES or name in CHANNEL_BODIES for name, _ in lookup(source)) or bool(
        reduction_bodies(source, spec)
    )
