"""Fast forms of the element-wise operators: branch-free float math g++ turns into full-width vector code.

Why: the correct-first formulas (knowledge/operators.py ELEMENTWISE) call scalar ``exp``/``erf``/
``log1p``/``tanh``; g++ -O3 -march=native without -ffast-math calls libm once per element there, and
the embedded model's verified activation kernels ran at 0.08-0.99x of torch (issue 31). A 1.5B model
pastes well but cannot invent a vectorized ``exp``, so the prompt hands it one: small helper
functions (``pragma_exp``, ``pragma_expm1``, ``pragma_log1p``, ``pragma_tanh``, ``pragma_erf``) and
each operator as a function over them, in the same shape as the scalar ones (``elu_fn(v, alpha)``).

Two facts of g++ 12 (Debian 12) shape every line here, measured on this machine (AMD EPYC Zen 4, -march
native = znver3 + AVX-512) with the verifier's flags (tools/inside/cext.py):

- A float ``c ? a : b`` whose arm computes something (``v >= 0 ? v : slope * v``, a clamp followed by
  arithmetic) is not vectorized at all on AVX2 (-mno-avx512f): g++ sinks the arithmetic into the arm,
  and without -fno-trapping-math (which the verifier refuses, tools/judging/anticheat.py) it will not execute
  a float operation speculatively ("not vectorized: control flow in loop"). With AVX-512 it masks
  the arm instead. So every select here is ``pragma_select``: the same choice made on the bits, which
  g++ vectorizes on both (vpternlogd / vpand+vpandn+vpor), with both values computed first.
- ``std::exp``/``std::erf``/``std::tanh`` are calls; a polynomial is inlined and vectorized.
  tests/test_fast_forms.py checks each form's build (objdump) for packed FMA and the vector width.

Accuracy: each helper's polynomial was fitted here in float64 (least squares on Chebyshev nodes,
reweighted toward minimax); in float32 each form is within a few ulp of torch (the test compares on
[-1e4, 1e4] with the special values at 1e-5, inside the verifier's 1e-4). Large magnitudes give
what torch gives: ``pragma_exp`` is inf above 88.72 and 0 below -103.97, never NaN.

glibc's vector math (libmvec, nodes/playbook.py libm_step) was measured as the alternative: see
``eval/bench_fast_elementwise.py`` and the README's "Fast forms" table for why these forms won.
"""

from __future__ import annotations

import ast
import re

from pragma.knowledge import operators, reductions

# name -> (helpers it calls, C++ text). Coefficients: fitted by the project (see the docstring).
HELPERS: dict[str, tuple[tuple[str, ...], str]] = {
    "pragma_select": (
        (),
        """// c ? a : b on the bits: g++ vectorizes it on AVX2 too (a float ?: with arithmetic in an arm it does not)
static inline float pragma_select(bool c, float a, float b) {
    int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    const int32_t m = -(int32_t)c, r = (ia & m) | (ib & ~m);
    float f;
    std::memcpy(&f, &r, 4);
    return f;
}""",
    ),
    "pragma_exp": (
        ("pragma_select",),
        """// e^r - 1 for |r| <= ln2/2: r + r^2 * P(r), P fitted (error < 1e-9)
static inline float pragma_expq(float r) {
    const float p = ((((1.984587630e-4f * r + 1.394061735e-3f) * r + 8.333389349e-3f) * r + 4.166636103e-2f) * r
                     + 1.666666637e-1f) * r + 5.000000044e-1f;
    return r + r * r * p;
}
// 2^k for an integer k in [-126, 127], built in the exponent bits
static inline float pragma_pow2(int32_t k) {
    const int32_t b = (k + 127) << 23;
    float s;
    std::memcpy(&s, &b, 4);
    return s;
}
// e^x as (2^n, e^r - 1) with x = n * ln2 + r (ln2 in two parts); x clamped to [-104, 89] first
static inline float pragma_exp_parts(float x, float& q, float& s1, float& s2) {
    x = pragma_select(x > 89.0f, 89.0f, x);
    x = pragma_select(x < -104.0f, -104.0f, x);
    const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(x / ln2): the 1.5 * 2^23 trick
    q = pragma_expq((x - n * 0.693359375f) - n * -2.12194440e-4f);
    const int32_t k = (int32_t)n, k1 = k >> 1;  // 2^n as two factors: n runs from -150 to 128
    s1 = pragma_pow2(k1);
    s2 = pragma_pow2(k - k1);
    return n;
}
// e^x: inf above 88.72, 0 below -103.97 (as torch)
static inline float pragma_exp(float x) {
    float q, s1, s2;
    pragma_exp_parts(x, q, s1, s2);
    return (1.0f + q) * s1 * s2;
}""",
    ),
    "pragma_expm1": (
        ("pragma_exp",),
        """// e^x - 1 without the cancellation near 0
static inline float pragma_expm1(float x) {
    float q, s1, s2;
    const float n = pragma_exp_parts(x, q, s1, s2);
    return pragma_select(n == 0.0f, q, (1.0f + q) * s1 * s2 - 1.0f);
}""",
    ),
    "pragma_log1p": (
        (),
        """// log(1 + y) for y > -1: 1 + y = 2^e * m, m in [0.707, 1.414), log m = f - f^2/2 + f^3 * P(f), f = m - 1
static inline float pragma_log1p(float y) {
    const float u = 1.0f + y;
    int32_t b;
    std::memcpy(&b, &u, 4);
    const int32_t e = (b - 0x3f3504f3) >> 23, mb = b - (e << 23);
    float m;
    std::memcpy(&m, &mb, 4);
    const float f = m - 1.0f, c = (y - (u - 1.0f)) / u;  // c: what rounding 1 + y lost
    const float p = ((((((-7.634429908e-2f * f + 1.276155036e-1f) * f - 1.316019505e-1f) * f + 1.420176247e-1f) * f
                       - 1.662335648e-1f) * f + 2.000122667e-1f) * f - 2.500082106e-1f) * f + 3.333333171e-1f;
    const float fe = (float)e;
    return fe * 0.693359375f + ((f - 0.5f * f * f + f * f * f * p) + (fe * -2.12194440e-4f + c));
}""",
    ),
    "pragma_tanh": (
        ("pragma_select",),
        """// tanh(x) = x P(x^2) / Q(x^2) for |x| < 9 (a rational fitted here: relative error < 4e-7), +-1 beyond
static inline float pragma_tanh(float x) {
    const float z = x * x;
    const float p = (((1.335512198e-08f * z + 2.060945245e-05f) * z + 3.495612356e-03f) * z + 1.338104666e-01f) * z
                    + 9.999999796e-01f;
    const float q = (((7.776757784e-07f * z + 3.285673199e-04f) * z + 2.587707627e-02f) * z + 4.671436230e-01f) * z + 1.0f;
    return pragma_select(std::fabs(x) < 9.0f, x * p / q, pragma_select(x < 0.0f, -1.0f, 1.0f));
}""",
    ),
    "pragma_erf": (
        ("pragma_select",),
        """// erf(x) = x P(x^2) / Q(x^2) for |x| < 3.92 (a rational fitted here: error < 4e-7), +-1 beyond
static inline float pragma_erf(float x) {
    const float z = x * x;
    const float p = ((((1.974838923e-06f * z + 2.880396551e-04f) * z + 4.003577804e-03f) * z + 5.346726858e-02f) * z
                     + 1.962474208e-01f) * z + 1.128378977e+00f;
    const float q = ((((3.748086169e-05f * z + 1.216342938e-03f) * z + 1.544428628e-02f) * z + 1.164757792e-01f) * z
                     + 5.072509080e-01f) * z + 1.0f;
    return pragma_select(std::fabs(x) < 3.92f, x * p / q, pragma_select(x < 0.0f, -1.0f, 1.0f));
}""",
    ),
}

# Headers the helpers and forms use (a pasted block must compile on its own).
HEADERS = ("#include <cmath>", "#include <cstdint>", "#include <cstring>")

# operator -> (helpers it calls, body of `<op>_fn` in v and the signature's arguments). The function's
# parameters are the scalar form's (operators.ELEMENTWISE signature, PyTorch's defaults).
FAST: dict[str, tuple[tuple[str, ...], str]] = {
    "relu": (("pragma_select",), "return pragma_select(v > 0.0f, v, 0.0f);"),
    "relu6": (
        ("pragma_select",),
        "const float a = pragma_select(v > 0.0f, v, 0.0f); return pragma_select(a < 6.0f, a, 6.0f);",
    ),
    "leaky_relu": (
        ("pragma_select",),
        "const float s = negative_slope * v; return pragma_select(v >= 0.0f, v, s);",
    ),
    "elu": (
        ("pragma_expm1",),
        "const float e = alpha * pragma_expm1(v); return pragma_select(v > 0.0f, v, e);",
    ),
    "selu": (
        ("pragma_expm1",),
        "const float e = 1.6732632423543772f * pragma_expm1(v);"
        " return 1.0507009873554805f * pragma_select(v > 0.0f, v, e);",
    ),
    "celu": (
        ("pragma_expm1",),
        "const float e = alpha * pragma_expm1(v / alpha); return pragma_select(v > 0.0f, v, e);",
    ),
    "gelu": (("pragma_erf",), "return 0.5f * v * (1.0f + pragma_erf(v * 0.70710678f));"),
    "sigmoid": (("pragma_exp",), "return 1.0f / (1.0f + pragma_exp(-v));"),
    "silu": (("pragma_exp",), "return v / (1.0f + pragma_exp(-v));"),
    # tanh(log1p(e^v)) = n / (n + 2) with n = e^v (e^v + 2): one exp instead of exp, log1p and tanh.
    # Above 20 (torch's softplus threshold) n / (n + 2) rounds to 1.
    "mish": (
        ("pragma_exp",),
        "const float e = pragma_exp(pragma_select(v < 20.0f, v, 20.0f)), n = e * (e + 2.0f); return v * (n / (n + 2.0f));",
    ),
    # log1p(e^u) = max(u, 0) + log1p(e^-|u|): e^-|u| never overflows.
    "softplus": (
        ("pragma_exp", "pragma_log1p"),
        "const float u = beta * v;"
        " const float s = (pragma_select(u > 0.0f, u, 0.0f) + pragma_log1p(pragma_exp(-std::fabs(u)))) / beta;"
        " return pragma_select(u > threshold, v, s);",
    ),
    "softsign": ((), "return v / (1.0f + std::fabs(v));"),
    "tanh": (("pragma_tanh",), "return pragma_tanh(v);"),
    "hardtanh": (
        ("pragma_select",),
        "const float a = pragma_select(v > min_val, v, min_val); return pragma_select(a < max_val, a, max_val);",
    ),
    "hardsigmoid": (
        ("pragma_select",),
        "const float a = pragma_select(v > -3.0f, v + 3.0f, 0.0f); return pragma_select(a < 6.0f, a, 6.0f) / 6.0f;",
    ),
    "hardswish": (
        ("pragma_select",),
        "const float a = pragma_select(v > -3.0f, v + 3.0f, 0.0f); return v * pragma_select(a < 6.0f, a, 6.0f) / 6.0f;",
    ),
    "logsigmoid": (
        ("pragma_exp", "pragma_log1p"),
        "const float s = pragma_log1p(pragma_exp(-std::fabs(v))); return pragma_select(v < 0.0f, v, 0.0f) - s;",
    ),
    "tanhshrink": (("pragma_tanh",), "return v - pragma_tanh(v);"),
    "softshrink": (
        ("pragma_select",),
        "const float a = v - lambd, b = v + lambd;"
        " return pragma_select(v > lambd, a, pragma_select(v < -lambd, b, 0.0f));",
    ),
    "hardshrink": (("pragma_select",), "return pragma_select(std::fabs(v) > lambd, v, 0.0f);"),
    # std::sqrt sets errno for v < 0, so g++ (no -fno-math-errno) never vectorizes it. Instead: an estimate
    # from the exponent bits and one corrected step (Moroz et al. 2018, constant 0x5f1ffff9: 6.5e-4),
    # one Newton step (7.6e-7); denormals scaled by 2^24 and the result by 2^12; then torch's special
    # values: v < 0 -> NaN, +-0 -> +-inf, inf -> 0.
    "rsqrt": (
        ("pragma_select",),
        "const bool tiny = v < 1.17549435e-38f; const float a = pragma_select(tiny, v * 16777216.0f, v);"
        " int32_t b; std::memcpy(&b, &a, 4); b = 0x5f1ffff9 - (b >> 1); float y; std::memcpy(&y, &b, 4);"
        " y = y * 0.703952253f * (2.38924456f - a * y * y); y = y * (1.5f - 0.5f * a * y * y);"
        " y = pragma_select(tiny, y * 4096.0f, y); y = pragma_select(v > 0.0f, y, NAN);"
        " y = pragma_select(v == 0.0f, std::copysign(INFINITY, v), y); return pragma_select(v == INFINITY, 0.0f, y);",
    ),
    "erf": (("pragma_erf",), "return pragma_erf(v);"),
}

# Extra functions after an operator's fast function, for what its arguments select: name -> (function's
# name, the argument that selects it (a regex on `name=value`), helpers it calls, C++ function).
VARIANTS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "gelu": (
        "gelu_tanh_fn",
        r"approximate\s*=\s*['\"]tanh['\"]",
        ("pragma_tanh",),
        "static inline float gelu_tanh_fn(float v) {  // F.gelu(x, approximate='tanh')\n"
        "    return 0.5f * v * (1.0f + pragma_tanh(0.7978845608f * (v + 0.044715f * v * v * v)));\n}",
    ),
}


def helpers_for(names: list[str] | tuple[str, ...]) -> list[str]:
    """The helpers the fast forms of ``names`` call, each once, every helper after those it calls."""
    return _helper_chain(h for name in names for h in FAST[name][0] + (VARIANTS[name][2] if name in VARIANTS else ()))


def fast_function(name: str) -> str:
    """``name``'s fast form as one C++ function with the scalar form's name and parameters
    (``static inline float elu_fn(float v, float alpha = 1.0f) { ... }``)."""
    signature, _ = operators.ELEMENTWISE[name]
    params = "".join(f", float {arg} = {float(value)!r}f" for arg, value in re.findall(r"(\w+)=(-?[0-9.]+)", signature))
    head = f"static inline float {operators.cpp_name(name)}(float v{params})"
    statements = _statements(FAST[name][1])
    if len(statements) == 1:
        return f"{head} {{ {statements[0]} }}"
    return head + " {\n" + "".join(f"    {line}\n" for line in statements) + "}"


def _statements(body: str) -> list[str]:
    """``body``'s statements (split after each `;` outside parentheses)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth == 0:
            out.append(body[start : i + 1].strip())
            start = i + 1
    return out


def source_of(names: list[str] | tuple[str, ...]) -> str:
    """The headers, the helpers and the fast functions of ``names`` (each in FAST), as one C++ text
    that compiles on its own: what the prompt shows and the tests build."""
    parts = [*HEADERS, *(HELPERS[h][1] for h in helpers_for(names))]
    for name in names:
        parts.append(fast_function(name))
        if name in VARIANTS:
            parts.append(VARIANTS[name][3])
    return "\n".join(parts)


def _constants(tree: ast.Module) -> dict[str, float]:
    """Module-level numeric constants (``slope = 0.2``)."""
    found: dict[str, float] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _number(node.value, {})
            if value is not None:
                found[node.targets[0].id] = value
    return found


def _number(node: ast.AST, constants: dict[str, float]) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand, constants)
        return None if inner is None else -inner
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def call_arguments(name: str, source: str) -> tuple[str, list[str]] | None:
    """(function, C++ arguments after the element) for the one call of operator ``name`` in
    ``source``: the values it passes (literals or module constants) for the parameters that differ
    from the defaults, positional ones included (``F.leaky_relu(x, negative_slope=slope)`` with
    ``slope = 0.2`` -> ``('leaky_relu_fn', ['0.2f'])``). None where that is not certain: no call or
    several, a value computed at run time, an argument the fast form does not take."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    constants = _constants(tree)
    signature, _ = operators.ELEMENTWISE[name]
    params = re.findall(r"(\w+)=(-?[0-9.]+)", signature)
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            keys = (called.lower(), operators._snake(called))
            if any(k == name or operators.ALIASES.get(k) == name for k in keys):
                calls.append((node, called[:1].isupper()))  # nn.LeakyReLU(0.2): no input argument first
    if len(calls) != 1:
        return None
    node, is_module = calls[0]
    function = operators.cpp_name(name)
    values = {arg: float(default) for arg, default in params}
    positional = node.args if is_module else node.args[1:]
    if len(positional) > len(params):
        return None
    for (arg, _), value_node in zip(params, positional, strict=False):
        value = _number(value_node, constants)
        if value is None:
            return None
        values[arg] = value
    for kw in node.keywords:
        if kw.arg in values:
            value = _number(kw.value, constants)
            if value is None:
                return None
            values[kw.arg] = value
        elif kw.arg == "inplace":
            continue
        elif name in VARIANTS and kw.arg and re.fullmatch(VARIANTS[name][1], f"{kw.arg}={ast.unparse(kw.value)}"):
            function = VARIANTS[name][0]
        elif not (kw.arg == "approximate" and ast.unparse(kw.value).strip("'\"") == "none"):
            return None  # an argument this form does not know
    # Up to the last parameter that differs from its default (C++ default arguments fill the rest).
    explicit = [arg for arg, default in params if values[arg] != float(default)]
    keep = params[: params.index(next(p for p in params if p[0] == explicit[-1])) + 1] if explicit else []
    return function, [f"{values[arg]!r}f" for arg, _ in keep]


# Provided forms (kernel format). Why: told to paste the block above its kernel, the embedded model
# copied ~40 lines of helpers for gelu_erf and lost a parenthesis in each rational (4 compile errors,
# 217 s for 951 output tokens at ~5 tokens/s), while the loop it had to write was 3 lines. In kernel
# format the prompt names the forms on an include line (HEADER) and tools/glue.py puts the
# definitions of every form a kernel calls without defining before its code (``prelude_for``).
_FUNCTION = re.compile(r"static inline float (\w+)\(")
# The row bodies' lambdas (knowledge/reductions.py), provided as functions of the same names: the
# embedded model pasted log_softmax's body without its exp_neg lambda and called exp_neg (undeclared).
_LAMBDA = re.compile(r"^([ \t]*)auto (\w+) = \[\]\(([^)]*)\) \{.*?^\1\};\n?", re.M | re.DOTALL)


def _as_function(lambda_text: str) -> str:
    """A row body's ``auto f = [](float v) { ... };`` as ``static inline float f(float v) { ... }``."""
    m = _LAMBDA.match(lambda_text + "\n")
    assert m is not None, lambda_text
    return f"static inline float {m.group(2)}({m.group(3)}) {{" + lambda_text.split("{", 1)[1].removesuffix(";")


HELPERS.update(
    {
        "exp_neg": ((), "// e^v for v <= 0 (knowledge/reductions.py)\n" + _as_function(reductions.EXP_NEG)),
        "log_f": ((), "// log(v) for v > 0 (knowledge/reductions.py)\n" + _as_function(reductions.LOG_POS)),
    }
)


# The include line a kernel-format prompt shows (tools/glue.py puts the definitions in its place).
HEADER = '"pragma_fast.h"'
LAMBDA_NOTES = {"exp_neg": "e^v for v <= 0", "log_f": "log v for v > 0"}


def without_lambdas(body: str) -> tuple[str, list[str]]:
    """``body`` without the lambdas PRAGMA provides as functions, and their names (kernel format)."""
    names = [m.group(2) for m in _LAMBDA.finditer(body) if m.group(2) in HELPERS]
    return _LAMBDA.sub(lambda m: "" if m.group(2) in HELPERS else m.group(0), body), names


# Every function name a kernel may call without writing it -> (kind, table key): an operator's form,
# a variant, or a helper entry (its internal functions, pragma_expq and the like, map to their entry).
PROVIDED: dict[str, tuple[str, str]] = {
    **{name: ("helper", entry) for entry, (_, text) in HELPERS.items() for name in _FUNCTION.findall(text)},
    **{operators.cpp_name(op): ("form", op) for op in FAST},
    **{fn: ("variant", op) for op, (fn, *_) in VARIANTS.items()},
}
# Comments, string and character literals: a name (or a brace) there is not code.
NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def _defines(code: str, name: str) -> bool:
    return re.search(rf"\b{name}\s*\([^;{{}}]*\)\s*\{{", code) is not None


def _helper_declaration(entry: str) -> str:
    """The entry's own function as a declaration (for a kernel that defines it after the prelude)."""
    head = next(line for line in HELPERS[entry][1].splitlines() if line.startswith(f"static inline float {entry}("))
    return head.rstrip(" {") + ";"


def prelude_for(cpp: str) -> str:
    """The C++ that defines every provided form ``cpp`` calls and does not define itself (with the
    helpers those call, each after what it calls), or '' when it calls none. A helper the kernel
    defines itself is declared here instead, so the forms before it compile and its own definition
    is the one used."""
    code = NOT_CODE.sub("", cpp)
    called = [n for n in PROVIDED if re.search(rf"\b{n}\s*\(", code) and not _defines(code, n)]
    if not called:
        return ""
    forms = [op for op in FAST if operators.cpp_name(op) in called]
    variants = [op for op in VARIANTS if VARIANTS[op][0] in called]
    entries = _helper_chain(
        [
            *(h for op in forms for h in FAST[op][0]),
            *(h for op in variants for h in VARIANTS[op][2]),
            *(PROVIDED[n][1] for n in called if PROVIDED[n][0] == "helper"),
        ]
    )
    parts = [*HEADERS]
    for entry in entries:
        own = _defines(code, entry)
        parts.append(_helper_declaration(entry) if own else HELPERS[entry][1])
    parts += [fast_function(op) for op in forms]
    parts += [VARIANTS[op][3] for op in variants]
    return "\n".join(parts)


def _helper_chain(entries) -> list[str]:
    """``entries`` and every helper they call, each after what it calls."""
    ordered: list[str] = []

    def add(helper: str) -> None:
        if helper in ordered:
            return
        for dep in HELPERS[helper][0]:
            add(dep)
        ordered.append(helper)

    for entry in entries:
        add(entry)
    return ordered


def declaration(name: str) -> str:
    """``name``'s form as the one line the kernel-format prompt shows (``float elu_fn(float v, float
    alpha = 1.0f);``)."""
    return fast_function(name).split(" {", 1)[0].removeprefix("static inline ") + ";"


def _call_shape(name: str) -> str:
    """``elu_fn(v, alpha=1.0)``: the form's parameters and defaults, not a C++ declaration to copy."""
    return re.sub(r"(\d)f\b", r"\1", re.sub(r"\bfloat |\s(?==)|(?<==)\s", "", declaration(name).removesuffix(";")))


def prompt_part(
    found: list[str],
    source: str,
    x: str = "x",
    ndim: int = 2,
    out: str = "out0",
    body: bool = True,
    provided: bool = False,
) -> str:
    """The <formulas> text for the element-wise operators ``found`` (operators.ELEMENTWISE names): the
    fast forms as one pasteable block (the correct-first function where no fast form exists), and,
    with ``body`` and one operator whose call's arguments are certain, pragma_kernel's whole body in
    the signature's names (input ``x`` with ``ndim`` dims, output ``out``). With ``provided`` (kernel
    format) the fast forms are named on PRAGMA's include line, to call; tools/glue.py defines them."""
    fast = [n for n in found if n in FAST]
    scalar = [operators.cpp_function(n) for n in found if n not in FAST]
    first = found[0]
    if provided and fast:
        # Named in the include's comment, not declared: shown `float elu_fn(float v, ...);`, the
        # embedded model wrote its own elu_fn (std::max, std::exp: wrong) beside it.
        uses = [f"{_call_shape(n)}: {n}(x) for one value" for n in fast]
        for n in (n for n in fast if n in VARIANTS and re.search(VARIANTS[n][1], source)):
            head, _, what = VARIANTS[n][3].splitlines()[0].partition("//")
            uses.append(f"{head.removeprefix('static inline float ').rstrip(' {')}: {what.strip()} for one value")
        text = (
            f"PRAGMA's header {HEADER} has the element-wise operators as fast C++ functions (PyTorch's math and"
            " default arguments, branch-free float math that g++ vectorizes). Include it and call them, as you"
            " call std::exp; do not write them yourself. Each computes its operator for one value"
            f" ({first}(x) is {operators.cpp_name(first)}(x[i]) for every i); pass the arguments forward() passes."
            "\n```cpp\n"
            + "\n".join(
                f"#include {HEADER}  // {u}" if i == 0 else f"//                       {u}" for i, u in enumerate(uses)
            )
            + "\n```"
        )
        if scalar:
            text += "\nPaste these above your kernel:\n```cpp\n" + "\n".join(["#include <cmath>", *scalar]) + "\n```"
    else:
        block = source_of(fast) if fast else "\n".join(["#include <cmath>", "#include <algorithm>"])
        block = "\n".join([block, *scalar])
        text = (
            "Element-wise operators as fast C++ functions (PyTorch's math and default arguments, branch-free float math"
            " that g++ vectorizes; keep every line as it is: std::exp, std::erf or an if/?: instead would make the"
            " loop scalar and slow): paste the whole block above your kernel; each computes its operator for one value"
            f" ({first}(x) is {operators.cpp_name(first)}(x[i]) for every i); pass the arguments forward() passes."
            f"\n```cpp\n{block}\n```"
        )
    call = call_arguments(first, source) if body and len(found) == 1 else None
    if call is not None:
        function, args = call
        dims = " * ".join(f"{x}_dim{i}" for i in range(max(int(ndim), 1)))
        text += (
            "\npragma_kernel's whole body, in your signature's names:\n```cpp\n"
            f"const int64_t n = {dims};  // every element of {x}\n"
            "#pragma omp parallel for simd\n"
            f"for (int64_t i = 0; i < n; ++i) {out}[i] = {function}({', '.join([f'{x}[i]', *args])});\n```"
        )
    return text
