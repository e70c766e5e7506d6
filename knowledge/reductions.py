"""Fast whole-kernel bodies for KernelBench level-1 operators beyond the activations and norms:
reductions over a dim, losses, pooling and cumulative sums (issue 31, part 3).

Why: the embedded 1.5B model composes what it is shown; a reduction it writes itself is a scalar
loop with a double accumulator (0.1x-0.3x of torch). Each body here is the whole body of
``pragma_kernel`` in the signature's names, written so g++ -O3 -march=native (tools/inside/cext.py) makes
vector code of it: reductions as ``#pragma omp simd reduction`` over float lanes (blocks added up in
double where one sum covers a whole tensor), a vectorizable exp and log for the losses, rows
interleaved for scans. tests/test_reductions.py compiles every body with the verifier's builder and
compares it with torch in float64 on the problem's shapes and on negated, scaled and mixed-sign
inputs; eval/bench_fast_rows.py times each against torch at 1 thread.

``find(source)`` names the operators a problem's source calls (``torch.sum(x, dim=1)``,
``F.mse_loss(``, ``nn.MaxPool2d(``, ``torch.cumsum(``, and the spelled-out MSE and hinge losses
KernelBench writes); ``body(name, source, spec)`` writes the body for the problem's kernel signature
(tools/glue.kernel_spec), or returns '' where the signature does not fit the form (the output's
shape is not the one the operator alone would give: the source does more than this operator).
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

# exp(v) for v <= 0 and log(v) in float, branch-free so the loops that call them vectorize (g++
# calls glibc's scalar expf/logf once per element otherwise). exp: Cephes' degree-6 polynomial on
# v - k ln2 times 2^k built in the exponent bits (about 1 ulp); log (v > 0 only): the mantissa in
# [sqrt(1/2), sqrt(2)) and Cephes' degree-8 polynomial (about 1 ulp).
EXP_NEG = """auto exp_neg = [](float v) {  // exp(v) for v <= 0, vectorizable
    v = v < -87.0f ? -87.0f : v;
    const float k = (v * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(v / ln2)
    const float f = (v - k * 0.693359375f) + k * 2.12194440e-4f;  // v - k ln2, ln2 in two parts
    float p = 1.9875691500e-4f;
    p = p * f + 1.3981999507e-3f;
    p = p * f + 8.3334519073e-3f;
    p = p * f + 4.1665795894e-2f;
    p = p * f + 1.6666665459e-1f;
    p = p * f + 5.0000001201e-1f;
    p = p * f * f + f + 1.0f;
    const int32_t bits = ((int32_t)k + 127) << 23;  // 2^k as a float's bits
    float two_k;
    __builtin_memcpy(&two_k, &bits, sizeof two_k);  // no header needed
    return p * two_k;
};"""
LOG_POS = """auto log_f = [](float v) {  // log(v) for v > 0, vectorizable (log_f(0) is -88, not -inf)
    // Integers only, no select (a float ?: or a bool-to-float left AVX2 builds scalar): the offset
    // moves the mantissa's range to [sqrt(1/2), sqrt(2)), log's polynomial range, as musl's logf.
    int32_t bits;
    __builtin_memcpy(&bits, &v, sizeof bits);
    bits += 0x3f800000 - 0x3f3504f3;
    const float e = (float)((bits >> 23) - 127);  // the binary exponent
    bits = (bits & 0x007fffff) + 0x3f3504f3;
    float m;
    __builtin_memcpy(&m, &bits, sizeof m);
    const float f = m - 1.0f, z = f * f;
    float p = 7.0376836292e-2f;
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    return f + (p * f * z - 0.5f * z - e * 2.12194440e-4f) + e * 0.693359375f;
};"""

# --- finding the operators --------------------------------------------------------------------

_REDUCE_CALL = re.compile(r"(?:\btorch\.|[\w)\]]\.)(sum|mean|amax|amin|max|min|argmax|argmin|logsumexp)\s*\(", re.I)
PATTERNS: dict[str, re.Pattern[str]] = {
    "mse_loss": re.compile(
        r"\bmse_loss\s*\(|\bMSELoss\s*\(|\bmean\(\s*\(\s*\w+\s*-\s*\w+\s*\)\s*(?:\*\*\s*2|\.pow\(\s*2\s*\))"
    ),
    "smooth_l1_loss": re.compile(r"\bsmooth_l1_loss\s*\(|\bSmoothL1Loss\s*\("),
    "huber_loss": re.compile(r"\bhuber_loss\s*\(|\bHuberLoss\s*\("),
    "kl_div": re.compile(r"\bkl_div\s*\(|\bKLDivLoss\s*\("),
    "cross_entropy": re.compile(r"\bcross_entropy\s*\(|\bCrossEntropyLoss\s*\("),
    "hinge_loss": re.compile(r"\bclamp\(\s*1(?:\.0)?\s*-\s*\w+\s*\*\s*\w+\s*,\s*min\s*=\s*0"),
    "cosine_similarity": re.compile(r"\bcosine_similarity\s*\(|\bCosineSimilarity\s*\("),
    "max_pool2d": re.compile(r"\bmax_pool2d\s*\(|\bMaxPool2d\s*\("),
    "max_pool1d": re.compile(r"\bmax_pool1d\s*\(|\bMaxPool1d\s*\("),
    "avg_pool2d": re.compile(r"\bavg_pool2d\s*\(|\bAvgPool2d\s*\("),
    "avg_pool1d": re.compile(r"\bavg_pool1d\s*\(|\bAvgPool1d\s*\("),
    "cumsum": re.compile(r"\bcumsum\s*\("),
    "cumprod": re.compile(r"\bcumprod\s*\("),
}
REDUCTIONS = ("sum", "mean", "max", "min", "argmax", "argmin", "logsumexp")
NAMES = frozenset((*REDUCTIONS, *PATTERNS))


def find(source: str) -> list[str]:
    """The operators of this module that ``source`` names, first mention first: the losses, pooling
    and scans by their calls, the reductions by a call with a ``dim`` (a reduction over the whole
    tensor, ``x.sum()``, and a spelled-out loss's own ``mean(`` are not one)."""
    code = model_code(source) or source
    hits: dict[str, int] = {}
    for name, pattern in PATTERNS.items():
        if m := pattern.search(code):
            hits.setdefault(name, m.start())
    if not hits:  # a loss's or a norm's inner mean/sum is that operator's, not a reduction to write
        for m in _REDUCE_CALL.finditer(code):
            raw = m.group(1).lower()
            name = {"amax": "max", "amin": "min"}.get(raw, raw)
            if _call_dim(code, m.end()) is not None:
                hits.setdefault(name, m.start())
    return sorted(hits, key=hits.get)


def model_code(source: str) -> str:
    """The text of Model's __init__ and forward, or '' where the source has no such class: what
    the operator is, not how get_inputs draws its inputs (``.softmax(dim=-1)``)."""
    try:
        tree = ast.parse(source)
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        init = [n for n in model.body if isinstance(n, ast.FunctionDef) and n.name in ("__init__", "forward")]
        return "\n".join(ast.get_source_segment(source, n) or "" for n in init)
    except (SyntaxError, StopIteration):
        return ""


def _call_args(code: str, start: int) -> str:
    """The argument text of the call whose '(' ends at ``start``."""
    depth, i = 1, start
    while i < len(code) and depth:
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    return code[start : i - 1]


def _call_dim(code: str, start: int) -> str | None:
    """The ``dim`` a reduction call passes (keyword or second positional argument), as written."""
    args = _call_args(code, start)
    if m := re.search(r"\bdim\s*=\s*(\([^)]*\)|[^,)]+)", args):
        return m.group(1).strip()
    parts = [p.strip() for p in re.split(r",(?![^(]*\))", args)]
    if len(parts) >= 2 and "=" not in parts[1]:
        return parts[1]
    if len(parts) == 1 and parts[0] and "=" not in parts[0] and re.fullmatch(r"-?\d+|self\.\w+", parts[0]):
        return parts[0]  # x.sum(1)
    return None


# --- the problem's values ---------------------------------------------------------------------


def _constants(source: str) -> dict[str, Any]:
    """Module-level literal constants (``rows = 2001``, ``dim = 1``)."""
    out: dict[str, Any] = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return out
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def _init_values(source: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Model.__init__'s parameters: the values the problem passes (the spec's init arguments),
    else their defaults."""
    values: dict[str, Any] = {}
    try:
        tree = ast.parse(source)
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        init = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        params = init.args.args[1:]
        for p, d in zip(params[len(params) - len(init.args.defaults) :], init.args.defaults, strict=True):
            try:
                values[p.arg] = ast.literal_eval(d)
            except ValueError:
                pass
    except (SyntaxError, StopIteration):
        pass
    for a in spec.get("args", []):
        if a["role"] == "init":  # the probe writes the value as text ('1')
            try:
                values[a["name"]] = ast.literal_eval(str(a.get("value")))
            except (ValueError, SyntaxError):
                values[a["name"]] = a.get("value")
    return values


def _resolve(text: str | None, source: str, spec: dict[str, Any]) -> Any:
    """A value as the source writes it (``1``, ``(2, 3)``, ``self.dim``, ``kernel_size``) -> Python."""
    if text is None:
        return None
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    name = text.removeprefix("self.")
    init = _init_values(source, spec)
    if name in init:
        return init[name]
    if text.startswith("self.") and (m := re.search(rf"self\.{re.escape(name)}\s*=\s*(\w+)", source)):
        if m.group(1) in init:
            return init[m.group(1)]
    return _constants(source).get(name)


def _kwarg(source: str, call: re.Pattern[str], key: str, position: int) -> str | None:
    """``key``'s value in the first call ``call`` matches (keyword, else positional ``position``
    counting the input as 0 for functional calls and the first argument as 0 for modules)."""
    code = model_code(source) or source
    m = call.search(code)
    if not m:
        return None
    args = _call_args(code, m.end())
    if k := re.search(rf"\b{key}\s*=\s*([^,)]+)", args):
        return k.group(1).strip()
    parts = [p.strip() for p in re.split(r",(?![^(]*\))", args)]
    if 0 <= position < len(parts) and parts[position] and "=" not in parts[position]:
        return parts[position]
    return None


# --- writing the bodies -------------------------------------------------------------------------


def _tensors(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    args = spec.get("args", [])
    inputs = [a for a in args if a["role"] == "input"]
    out = next(a for a in args if a["role"] == "output")
    return inputs, out


def _prod(names: list[str]) -> str:
    return " * ".join(names) or "1"


def _dims(x: str, lo: int, hi: int) -> str:
    return _prod([f"{x}_dim{k}" for k in range(lo, hi)])


def _numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def body(name: str, source: str, spec: dict[str, Any]) -> str:
    """``name``'s body for the problem's signature, or '' where it does not fit."""
    inputs, out = _tensors(spec)
    if not inputs:
        return ""
    writer = _WRITERS[name]
    try:
        return writer(name, source, spec, inputs, out)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
        return ""


def _reduce(name: str, source: str, spec: dict[str, Any], inputs: list[dict[str, Any]], out: dict[str, Any]) -> str:
    code = model_code(source) or source
    m = next(
        (
            m
            for m in _REDUCE_CALL.finditer(code)
            if {"amax": "max", "amin": "min"}.get(m.group(1).lower(), m.group(1).lower()) == name
        ),
        None,
    )
    if m is None:
        return ""
    x = inputs[0]
    ndim, xn, o = len(x["shape"]), x["name"], out["name"]
    dim = _resolve(_call_dim(code, m.end()), source, spec)
    dims = sorted(d % ndim for d in (dim if isinstance(dim, (tuple, list)) else [dim]))
    if dims != list(range(dims[0], dims[-1] + 1)):
        return ""  # dims that are not adjacent: no single (outer, n, inner) view
    lo, hi = dims[0], dims[-1] + 1
    if _numel(out["shape"]) * _numel(x["shape"][lo:hi]) != _numel(x["shape"]) or x["dtype"] != "float32":
        return ""
    integer = name in ("argmax", "argmin")
    if (out["dtype"] == "int64") != integer:
        return ""
    outer, n, inner = _dims(xn, 0, lo), _dims(xn, lo, hi), _dims(xn, hi, ndim)
    head = [
        f"// {name} over dim {dims[0] if len(dims) == 1 else tuple(dims)} of {xn}: "
        "outer blocks of n x inner values, one result per (outer, inner)",
        f"const int64_t outer = {outer}, n = {n}, inner = {inner};",
    ]
    if hi == ndim:  # the reduced dims are the last: one contiguous row per result
        per_row = {
            "sum": "float s = 0.0f;\n#pragma omp simd reduction(+ : s)\nfor (int64_t j = 0; j < n; ++j) s += row[j];\n"
            "OUT[r] = s;",
            "mean": "float s = 0.0f;\n#pragma omp simd reduction(+ : s)\nfor (int64_t j = 0; j < n; ++j) s += row[j];\n"
            "OUT[r] = s / n;",
            "max": "float m = row[0];\n#pragma omp simd reduction(max : m)\n"
            "for (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;\nOUT[r] = m;",
            "min": "float m = row[0];\n#pragma omp simd reduction(min : m)\n"
            "for (int64_t j = 0; j < n; ++j) m = row[j] < m ? row[j] : m;\nOUT[r] = m;",
            "argmax": "float m = row[0];  // the largest value (vector max), then its first index, as torch's\n"
            "#pragma omp simd reduction(max : m)\nfor (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;\n"
            "int64_t at = 0;\nwhile (at < n - 1 && row[at] != m) ++at;\nOUT[r] = at;",
            "argmin": "float m = row[0];  // the smallest value (vector min), then its first index, as torch's\n"
            "#pragma omp simd reduction(min : m)\nfor (int64_t j = 0; j < n; ++j) m = row[j] < m ? row[j] : m;\n"
            "int64_t at = 0;\nwhile (at < n - 1 && row[at] != m) ++at;\nOUT[r] = at;",
            "logsumexp": f"{EXP_NEG}\nfloat m = row[0];\n#pragma omp simd reduction(max : m)\n"
            "for (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;\nfloat s = 0.0f;\n"
            "#pragma omp simd reduction(+ : s)\nfor (int64_t j = 0; j < n; ++j) s += exp_neg(row[j] - m);\n"
            "OUT[r] = m + std::log(s);",
        }[name]
        lines = [
            *head,
            "#pragma omp parallel for",
            "for (int64_t r = 0; r < outer; ++r) {",
            f"    const float* row = {xn} + r * n;",
            *(f"    {line}" for line in per_row.replace("OUT", o).splitlines()),
            "}",
        ]
        return "\n".join(lines)
    # A dim before the last: whole rows of `inner` contiguous values combine element by element,
    # so the vector lanes run along inner (each result's values are inner apart in memory).
    if name == "logsumexp":
        return ""
    combine = {
        "sum": "acc[i] += v[i];",
        "mean": "acc[i] += v[i];",
        "max": "acc[i] = v[i] > acc[i] ? v[i] : acc[i];",
        "min": "acc[i] = v[i] < acc[i] ? v[i] : acc[i];",
        "argmax": "if (v[i] > acc[i]) { acc[i] = v[i]; at[i] = j; }",
        "argmin": "if (v[i] < acc[i]) { acc[i] = v[i]; at[i] = j; }",
    }[name]
    finish = {
        "mean": f"for (int64_t i = 0; i < w; ++i) {o}[o * inner + i0 + i] = acc[i] / n;",
        "argmax": f"for (int64_t i = 0; i < w; ++i) {o}[o * inner + i0 + i] = at[i];",
        "argmin": f"for (int64_t i = 0; i < w; ++i) {o}[o * inner + i0 + i] = at[i];",
    }.get(name, f"for (int64_t i = 0; i < w; ++i) {o}[o * inner + i0 + i] = acc[i];")
    lines = [
        *head,
        "#pragma omp parallel for collapse(2)",
        "for (int64_t o = 0; o < outer; ++o) {",
        "    for (int64_t i0 = 0; i0 < inner; i0 += 256) {  // 256 results at a time: acc stays in L1",
        "        const int64_t w = inner - i0 < 256 ? inner - i0 : 256;",
        f"        const float* src = {xn} + o * n * inner + i0;",
        "        float acc[256];",
        *(["        int64_t at[256];", "        for (int64_t i = 0; i < w; ++i) at[i] = 0;"] if integer else []),
        "        for (int64_t i = 0; i < w; ++i) acc[i] = src[i];",
        "        for (int64_t j = 1; j < n; ++j) {",
        "            const float* v = src + j * inner;",
        "            #pragma omp simd",
        f"            for (int64_t i = 0; i < w; ++i) {combine}",
        "        }",
        f"        {finish}",
        "    }",
        "}",
    ]
    return "\n".join(lines)


def _reduction_mode(source: str, default: str = "mean") -> str:
    m = re.search(r"reduction\s*=\s*['\"](\w+)['\"]", source)
    return m.group(1) if m else default


def _elementwise_loss(
    name: str, source: str, spec: dict[str, Any], inputs: list[dict[str, Any]], out: dict[str, Any]
) -> str:
    """MSE, smooth L1, Huber, KL divergence and the hinge loss: a value per element of the first
    input (the second one the same shape, or broadcast along the last dim), then no reduction, the
    mean, the sum, or KL's batchmean (the sum over the batch size)."""
    if len(inputs) < 2:
        return ""
    x, y = inputs[0], inputs[1]
    xn, yn, o = x["name"], y["name"], out["name"]
    ndim = len(x["shape"])
    if x["dtype"] != "float32" or y["dtype"] != "float32" or ndim == 0:
        return ""
    if y["shape"] == x["shape"]:
        yv = f"{yn}[r * n + j]"
    elif len(y["shape"]) == 1 and y["shape"][0] == x["shape"][-1]:
        yv = f"{yn}[j]"  # broadcast along the last dim, as torch aligns a 1-D tensor
    else:
        return ""
    mode = _reduction_mode(source)  # PyTorch's default: the mean (also the spelled-out MSE's)
    if name == "hinge_loss":
        mode = "mean" if re.search(r"\bmean\s*\(", source) else "sum" if re.search(r"\bsum\s*\(", source) else "none"
    if (mode == "none") != (out["shape"] == x["shape"]) or (mode != "none" and _numel(out["shape"]) != 1):
        return ""
    beta = _resolve(_kwarg(source, PATTERNS[name], "beta" if name == "smooth_l1_loss" else "delta", 99), source, spec)
    prep = []
    if name == "mse_loss":
        term = "(a - b) * (a - b)"
        what = "(a - b)^2"
    elif name == "smooth_l1_loss":
        beta = float(beta if beta is not None else 1.0)
        prep = [f"const float beta = {beta!r}f;  // smooth_l1_loss's beta"]
        # Branch-free (a float ?: with arithmetic in an arm stays scalar on AVX2: g++ will not compute
        # the arm speculatively): with c = min(|d|, beta), 0.5 c^2 / beta + (|d| - c).
        prep.append(
            "auto loss = [beta](float a, float b) {\n"
            "    const float d = std::fabs(a - b), c = std::min(d, beta);\n"
            "    return 0.5f * c * c / beta + (d - c);  // |d| < beta: 0.5 d^2 / beta, else |d| - beta / 2\n"
            "};"
        )
        term = "loss(a, b)"
        what = "0.5 d^2 / beta where |d| < beta, else |d| - beta / 2"
    elif name == "huber_loss":
        beta = float(beta if beta is not None else 1.0)
        prep = [f"const float delta = {beta!r}f;  // huber_loss's delta"]
        prep.append(
            "auto loss = [delta](float a, float b) {  // branch-free, as smooth_l1_loss's\n"
            "    const float d = std::fabs(a - b), c = std::min(d, delta);\n"
            "    return 0.5f * c * c + delta * (d - c);  // |d| <= delta: 0.5 d^2, else delta (|d| - delta / 2)\n"
            "};"
        )
        term = "loss(a, b)"
        what = "0.5 d^2 where |d| <= delta, else delta (|d| - delta / 2)"
    elif name == "kl_div":
        logged = bool(re.search(r"kl_div\s*\(\s*torch\.log\s*\(", source))
        if re.search(r"log_target\s*=\s*True", source):
            return ""
        prep = [LOG_POS]
        inp = "log_f(a)" if logged else "a"
        # A target of 0 adds 0, as torch's xlogy: log_f(0) is finite, so 0 * (log_f(0) - input) is 0
        # (no select: a ?: or std::max with a constant left the AVX2 build scalar).
        term = f"b * (log_f(b) - {inp})"
        what = f"target * (log(target) - {'log(input)' if logged else 'input'}), 0 where target is 0"
    else:  # hinge
        term = "std::max(1.0f - a * b, 0.0f)"
        what = "max(1 - pred * target, 0)"
    rows, n = _dims(xn, 0, ndim - 1), f"{xn}_dim{ndim - 1}"
    head = [
        f"// {name}: {what} per element of {xn} (a) and {yn} (b), reduction='{mode}'",
        f"const int64_t rows = {rows}, n = {n};  // every dim but the last, the last",
        *prep,
    ]
    if mode == "none":
        return "\n".join(
            [
                *head,
                "#pragma omp parallel for",
                "for (int64_t r = 0; r < rows; ++r) {",
                "    #pragma omp simd",
                "    for (int64_t j = 0; j < n; ++j) {",
                f"        const float a = {xn}[r * n + j], b = {yv};",
                f"        {o}[r * n + j] = {term};",
                "    }",
                "}",
            ]
        )
    divisor = {"mean": "((double)rows * n)", "sum": "1.0", "batchmean": f"(double){xn}_dim0"}.get(mode)
    if divisor is None:
        return ""
    return "\n".join(
        [
            *head,
            "double total = 0.0;  // each row's float lanes, the rows added up in double",
            "#pragma omp parallel for reduction(+ : total)",
            "for (int64_t r = 0; r < rows; ++r) {",
            "    float s = 0.0f;",
            "    #pragma omp simd reduction(+ : s)",
            "    for (int64_t j = 0; j < n; ++j) {",
            f"        const float a = {xn}[r * n + j], b = {yv};",
            f"        s += {term};",
            "    }",
            "    total += s;",
            "}",
            f"{o}[0] = (float)(total / {divisor});",
        ]
    )


def _cross_entropy(
    name: str, source: str, spec: dict[str, Any], inputs: list[dict[str, Any]], out: dict[str, Any]
) -> str:
    if len(inputs) < 2 or len(inputs[0]["shape"]) != 2 or inputs[1]["dtype"] != "int64":
        return ""
    if re.search(r"label_smoothing|ignore_index|weight\s*=", source):
        return ""
    x, y, o = inputs[0]["name"], inputs[1]["name"], out["name"]
    mode = _reduction_mode(source)
    rows = inputs[0]["shape"][0]
    if (mode == "none" and out["shape"] != [rows]) or (mode != "none" and _numel(out["shape"]) != 1):
        return ""
    if mode not in ("none", "mean", "sum"):
        return ""
    per_row = [
        f"    const float* row = {x} + r * n;",
        *(f"    {line}" for line in EXP_NEG.splitlines()),
        "    float m = row[0];",
        "    #pragma omp simd reduction(max : m)",
        "    for (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;",
        "    float s = 0.0f;",
        "    #pragma omp simd reduction(+ : s)",
        "    for (int64_t j = 0; j < n; ++j) s += exp_neg(row[j] - m);",
        f"    const float loss = m + std::log(s) - row[{y}[r]];  // log-sum-exp minus the label's logit",
    ]
    head = [
        f"// cross_entropy: per row of {x} (logits), -log softmax at the label {y}[r]; reduction='{mode}'",
        f"const int64_t rows = {x}_dim0, n = {x}_dim1;",
    ]
    if mode == "none":
        return "\n".join(
            [
                *head,
                "#pragma omp parallel for",
                "for (int64_t r = 0; r < rows; ++r) {",
                *per_row,
                f"    {o}[r] = loss;",
                "}",
            ]
        )
    divisor = "rows" if mode == "mean" else "1.0"
    return "\n".join(
        [
            *head,
            "double total = 0.0;",
            "#pragma omp parallel for reduction(+ : total)",
            "for (int64_t r = 0; r < rows; ++r) {",
            *per_row,
            "    total += loss;",
            "}",
            f"{o}[0] = (float)(total / {divisor});",
        ]
    )


def _cosine(name: str, source: str, spec: dict[str, Any], inputs: list[dict[str, Any]], out: dict[str, Any]) -> str:
    if len(inputs) < 2 or len(inputs[0]["shape"]) != 2 or inputs[1]["shape"] != inputs[0]["shape"]:
        return ""
    dim = _resolve(_kwarg(source, PATTERNS[name], "dim", 2), source, spec)
    if dim not in (None, 1, -1):
        return ""
    eps = _resolve(_kwarg(source, PATTERNS[name], "eps", 3), source, spec)
    eps = float(eps if eps is not None else 1e-8)
    a, b, o = inputs[0]["name"], inputs[1]["name"], out["name"]
    rows = inputs[0]["shape"][0]
    # One result per row, or a loss: the mean of 1 - cos over the rows (KernelBench's
    # CosineSimilarityLoss: torch.mean(1 - cosine_similarity(...))).
    loss = _numel(out["shape"]) == 1 and rows != 1
    if not loss and out["shape"] != [rows]:
        return ""
    per_row = [
        f"    const float* p = {a} + r * n;",
        f"    const float* q = {b} + r * n;",
        "    float dot = 0.0f, pp = 0.0f, qq = 0.0f;",
        "    #pragma omp simd reduction(+ : dot, pp, qq)",
        "    for (int64_t j = 0; j < n; ++j) {",
        "        dot += p[j] * q[j];",
        "        pp += p[j] * p[j];",
        "        qq += q[j] * q[j];",
        "    }",
        "    const float cos = dot / (std::max(std::sqrt(pp), eps) * std::max(std::sqrt(qq), eps));",
    ]
    head = [
        f"// cosine_similarity of the rows of {a} and {b} (dim=1): dot / (max(|p|, eps) * max(|q|, eps))",
        f"const int64_t rows = {a}_dim0, n = {a}_dim1;",
        f"const float eps = {eps!r}f;",
    ]
    if not loss:
        return "\n".join(
            [
                *head,
                "#pragma omp parallel for",
                "for (int64_t r = 0; r < rows; ++r) {",
                *per_row,
                f"    {o}[r] = cos;",
                "}",
            ]
        )
    return "\n".join(
        [
            *head,
            "double total = 0.0;  // the loss: the mean over the rows of 1 - cos",
            "#pragma omp parallel for reduction(+ : total)",
            "for (int64_t r = 0; r < rows; ++r) {",
            *per_row,
            "    total += 1.0f - cos;",
            "}",
            f"{o}[0] = (float)(total / rows);",
        ]
    )


def _pool(name: str, source: str, spec: dict[str, Any], inputs: list[dict[str, Any]], out: dict[str, Any]) -> str:
    two = name.endswith("2d")
    x = inputs[0]
    ndim = len(x["shape"])
    if ndim != (4 if two else 3) or len(out["shape"]) != ndim or x["dtype"] != "float32":
        return ""
    functional = bool(re.search(rf"\b{name}\s*\(", source))
    call = PATTERNS[name]
    offset = 1 if functional else 0  # F.max_pool2d(x, 3, ...) vs nn.MaxPool2d(3, ...)

    def arg(key: str, position: int) -> Any:
        return _resolve(_kwarg(source, call, key, position + offset), source, spec)

    k = arg("kernel_size", 0)
    s = arg("stride", 1)
    p = arg("padding", 2) or 0
    d = (arg("dilation", 3) or 1) if name.startswith("max") else 1
    values = [k, s, p, d]
    if any(isinstance(v, (tuple, list)) and len(set(v)) > 1 for v in values):
        return ""  # different sizes per spatial dim: not this form
    k, s, p, d = (v[0] if isinstance(v, (tuple, list)) else v for v in values)
    s = s or k
    if not all(isinstance(v, int) for v in (k, s, p, d)):
        return ""
    if re.search(r"ceil_mode\s*=\s*True|count_include_pad\s*=\s*False|return_indices\s*=\s*True", source):
        return ""
    xn, o = x["name"], out["name"]
    is_max = name.startswith("max")
    init = "-INFINITY" if is_max else "0.0f"
    combine = "acc[w] = v > acc[w] ? v : acc[w];" if is_max else "acc[w] += v;"
    if out["shape"][-1] < 16 and d == 1:
        return _pool_narrow(name, k, s, p, two, xn, o, is_max)
    lines = [
        f"// {name}: kernel {k}, stride {s}, padding {p}"
        + (f", dilation {d}" if is_max else "")
        + (" (padding never wins)" if is_max else f" (the padded zeros count: divide by {k * k if two else k})"),
        f"const int64_t planes = {xn}_dim0 * {xn}_dim1;  // one (sample, channel) plane at a time",
        f"const int64_t H = {f'{xn}_dim2' if two else '1'}, W = {xn}_dim{ndim - 1};",
        f"const int64_t OH = {f'{o}_dim2' if two else '1'}, OW = {o}_dim{ndim - 1};",
        f"const int64_t K = {k}, S = {s}, P = {p}, D = {d};",
        "// The outputs w whose tap w * S + kw * D - P lies inside a row: [lo[kw], hi[kw]), computed once",
        "// (integer divisions inside the loops cost more than the pooling of a small window).",
        "int64_t lo[K], hi[K];",
        "for (int64_t kw = 0; kw < K; ++kw) {",
        "    const int64_t off = kw * D - P;",
        "    lo[kw] = off < 0 ? (-off + S - 1) / S : 0;",
        "    const int64_t end = off < W ? (W - 1 - off) / S + 1 : 0;",
        "    hi[kw] = end < OW ? end : OW;",
        "}",
        "#pragma omp parallel for collapse(2)",
        "for (int64_t pl = 0; pl < planes; ++pl) {",
        "    for (int64_t oh = 0; oh < OH; ++oh) {",
        "        float* acc = " + o + " + (pl * OH + oh) * OW;",
        f"        for (int64_t w = 0; w < OW; ++w) acc[w] = {init};",
        f"        for (int64_t kh = 0; kh < {'K' if two else '1'}; ++kh) {{",
        "            const int64_t ih = oh * S - P + kh * D;"
        if two
        else "            const int64_t ih = 0;  // 1-D: one row",
        *(["            if (ih < 0 || ih >= H) continue;  // a padded row"] if two else []),
        f"            const float* in = {xn} + (pl * H + ih) * W;",
        "            for (int64_t kw = 0; kw < K; ++kw) {",
        "                const int64_t off = kw * D - P;",
        *(["                #pragma omp simd"] if out["shape"][-1] >= 16 else []),  # a few outputs: no vector set-up
        "                for (int64_t w = lo[kw]; w < hi[kw]; ++w) {",
        "                    const float v = in[w * S + off];",
        f"                    {combine}",
        "                }",
        "            }",
        "        }",
    ]
    if not is_max:
        lines.append(f"        for (int64_t w = 0; w < OW; ++w) acc[w] *= {1.0 / (k * k if two else k)!r}f;")
    lines += ["    }", "}"]
    return "\n".join(lines)


def _pool_narrow(name: str, k: int, s: int, p: int, two: bool, xn: str, o: str, is_max: bool) -> str:
    """Pooling with few outputs per row (a large window, KernelBench's AvgPool2d(11) on 32 x 32):
    one output at a time, its window's rows read contiguously; vector lanes along a 2-wide output
    row would cost more to set up than they add."""
    scale = 1.0 / (k * k if two else k)
    combine = "a = v[kw] > a ? v[kw] : a;" if is_max else "a += v[kw];"
    return "\n".join(
        [
            f"// {name}: kernel {k}, stride {s}, padding {p}"
            + (" (padding never wins)" if is_max else " (the padded zeros count)"),
            f"const int64_t planes = {xn}_dim0 * {xn}_dim1;  // one (sample, channel) plane at a time",
            f"const int64_t H = {f'{xn}_dim2' if two else '1'}, W = {xn}_dim{3 if two else 2};",
            f"const int64_t OH = {f'{o}_dim2' if two else '1'}, OW = {o}_dim{3 if two else 2};",
            f"const int64_t K = {k}, S = {s}, P = {p};",
            "#pragma omp parallel for collapse(2)",
            "for (int64_t pl = 0; pl < planes; ++pl) {",
            "    for (int64_t oh = 0; oh < OH; ++oh) {",
            "        for (int64_t ow = 0; ow < OW; ++ow) {",
            "            const int64_t w0 = ow * S - P;  // the window's first column",
            "            const int64_t k0 = w0 < 0 ? -w0 : 0, k1 = W - w0 < K ? W - w0 : K;  // its columns inside",
            f"            float a = {'-INFINITY' if is_max else '0.0f'};",
            f"            for (int64_t kh = 0; kh < {'K' if two else '1'}; ++kh) {{",
            "                const int64_t ih = oh * S - P + kh;" if two else "                const int64_t ih = 0;",
            *(["                if (ih < 0 || ih >= H) continue;"] if two else []),
            f"                const float* v = {xn} + (pl * H + ih) * W + w0;",
            f"                for (int64_t kw = k0; kw < k1; ++kw) {combine}",
            "            }",
            f"            {o}[(pl * OH + oh) * OW + ow] = a{'' if is_max else f' * {scale!r}f'};",
            "        }",
            "    }",
            "}",
        ]
    )


def _scan(name: str, source: str, spec: dict[str, Any], inputs: list[dict[str, Any]], out: dict[str, Any]) -> str:
    x = inputs[0]
    ndim = len(x["shape"])
    if out["shape"] != x["shape"] or x["dtype"] != "float32" or out["dtype"] != "float32" or ndim == 0:
        return ""
    code = model_code(source) or source
    m = PATTERNS[name].search(code)
    dim = _resolve(_call_dim(code, m.end()), source, spec)
    if not isinstance(dim, int):
        return ""
    dim %= ndim
    if re.search(r"narrow\(|torch\.cat\(|\bmask\b|\*\s*\w*mask", code):
        return ""  # exclusive or masked scans: more than this operator
    flipped = bool(re.search(r"\.flip\(|torch\.flip\(", code))
    xn, o = x["name"], out["name"]
    op = "+=" if name == "cumsum" else "*="
    start = "0.0" if name == "cumsum" else "1.0"
    rows, n, inner = _dims(xn, 0, dim), f"{xn}_dim{dim}", _dims(xn, dim + 1, ndim)
    order = "from the last element back (the flips)" if flipped else "in order"
    j_first = "n - 1 - t" if flipped else "t"
    if dim == ndim - 1:
        return "\n".join(
            [
                f"// {name} along the last dim of {xn}, {order}: 4 rows at once, so 4 independent running",
                "// values hide the add's latency (a scan has no vector form g++ finds); in double, as torch.",
                "// Not 8: with rows 16 KB apart (4096 floats) 8 input and 8 output streams share one L1 set",
                "// and thrash it (64 x 4096: 5.4 ns per element, torch 1.1; 4 rows: 0.46).",
                f"const int64_t rows = {rows}, n = {n};",
                "#pragma omp parallel for",
                "for (int64_t r0 = 0; r0 < rows; r0 += 4) {",
                "    const int64_t nr = rows - r0 < 4 ? rows - r0 : 4;",
                f"    const float* in = {xn} + r0 * n;",
                f"    float* res = {o} + r0 * n;",
                "    if (nr == 4) {",
                f"        double acc[4] = {{{', '.join([start] * 4)}}};",
                "        for (int64_t t = 0; t < n; ++t) {",
                f"            const int64_t j = {j_first};",
                "            for (int k = 0; k < 4; ++k) {",
                f"                acc[k] {op} in[k * n + j];",
                "                res[k * n + j] = (float)acc[k];",
                "            }",
                "        }",
                "    } else {",
                "        for (int64_t k = 0; k < nr; ++k) {",
                f"            double acc = {start};",
                "            for (int64_t t = 0; t < n; ++t) {",
                f"                const int64_t j = {j_first};",
                f"                acc {op} in[k * n + j];",
                "                res[k * n + j] = (float)acc;",
                "            }",
                "        }",
                "    }",
                "}",
            ]
        )
    # A dim before the last: whole rows of `inner` values are combined element by element.
    prev = "+ 1" if flipped else "- 1"
    return "\n".join(
        [
            f"// {name} along dim {dim} of {xn}, {order}: rows of inner values combine element by element",
            f"const int64_t outer = {rows}, n = {n}, inner = {inner};",
            "#pragma omp parallel for",
            "for (int64_t o = 0; o < outer; ++o) {",
            f"    const float* in = {xn} + o * n * inner;",
            f"    float* res = {o} + o * n * inner;",
            "    for (int64_t t = 0; t < n; ++t) {",
            f"        const int64_t j = {j_first};",
            "        #pragma omp simd",
            "        for (int64_t i = 0; i < inner; ++i)",
            f"            res[j * inner + i] = t == 0 ? in[j * inner + i] : res[(j {prev}) * inner + i] "
            f"{op[0]} in[j * inner + i];",
            "    }",
            "}",
        ]
    )


_WRITERS = {
    **dict.fromkeys(REDUCTIONS, _reduce),
    **dict.fromkeys(("mse_loss", "smooth_l1_loss", "huber_loss", "kl_div", "hinge_loss"), _elementwise_loss),
    "cross_entropy": _cross_entropy,
    "cosine_similarity": _cosine,
    **dict.fromkeys(("max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d"), _pool),
    **dict.fromkeys(("cumsum", "cumprod"), _scan),
}
