"""The operator table's names: what each element-wise operator computes (``ELEMENTWISE``), the other
spellings of every operator (``ALIASES``, ``_snake``) and the C++ functions a kernel pastes
(``cpp_name``, ``cpp_function``).

Its own module so that ``fast_forms.py`` (written against this table) and ``formulas.py`` (which
puts the fast forms in the prompt, and re-exports every name here) do not import each other.
"""

from __future__ import annotations

import re

# Element-wise operators: name -> (signature with PyTorch's defaults, C++ expression in v). The
# expression is valid C++ with `using namespace std` and the signature's arguments as constants:
# tests/test_formulas.py compiles every one with g++ and compares it with torch. Constants are
# float literals: a double one (`sqrt(2.0)`) turns the whole expression into double arithmetic
# (GELU 5-20% slower in a g++ -O3 loop here; what keeps it at 0.06x of torch is the scalar erf).
ELEMENTWISE: dict[str, tuple[str, str]] = {
    "relu": ("relu(v)", "v > 0 ? v : 0"),
    "relu6": ("relu6(v)", "min(max(v, 0.0f), 6.0f)"),
    "leaky_relu": ("leaky_relu(v, negative_slope=0.01)", "v >= 0 ? v : negative_slope * v"),
    "elu": ("elu(v, alpha=1.0)", "v > 0 ? v : alpha * (exp(v) - 1)"),
    "selu": ("selu(v)", "1.0507009873554805f * (v > 0 ? v : 1.6732632423543772f * (exp(v) - 1))"),
    "celu": ("celu(v, alpha=1.0)", "max(0.0f, v) + min(0.0f, (float)(alpha * (exp(v / alpha) - 1)))"),
    "gelu": ("gelu(v) (approximate='none', the default)", "0.5f * v * (1 + erf(v * 0.70710678118654752f))"),
    "sigmoid": ("sigmoid(v)", "1 / (1 + exp(-v))"),
    "silu": ("silu(v)", "v / (1 + exp(-v))"),
    "mish": ("mish(v)", "v * tanh(v > 20 ? v : log1p(exp(v)))"),
    "softplus": ("softplus(v, beta=1.0, threshold=20.0)", "v * beta > threshold ? v : log1p(exp(beta * v)) / beta"),
    "softsign": ("softsign(v)", "v / (1 + fabs(v))"),
    "tanh": ("tanh(v)", "tanh(v)"),
    "hardtanh": ("hardtanh(v, min_val=-1.0, max_val=1.0)", "min(max(v, (float)min_val), (float)max_val)"),
    "hardsigmoid": ("hardsigmoid(v)", "min(max(v / 6 + 0.5f, 0.0f), 1.0f)"),
    "hardswish": ("hardswish(v)", "v * min(max(v + 3, 0.0f), 6.0f) / 6"),
    "logsigmoid": ("logsigmoid(v)", "min(v, 0.0f) - log1p(exp(-fabs(v)))"),
    "tanhshrink": ("tanhshrink(v)", "v - tanh(v)"),
    "softshrink": ("softshrink(v, lambd=0.5)", "v > lambd ? v - lambd : (v < -lambd ? v + lambd : 0)"),
    "hardshrink": ("hardshrink(v, lambd=0.5)", "fabs(v) > lambd ? v : 0"),
    "rsqrt": ("rsqrt(v)", "1 / sqrt(v)"),
    "erf": ("erf(v)", "erf(v)"),
}

# Module classes and other spellings -> FORMULAS keys.
ALIASES: dict[str, str] = {
    "re_lu": "relu",
    "re_lu6": "relu6",
    "leaky_re_lu": "leaky_relu",
    "e_lu": "elu",
    "se_lu": "selu",
    "ce_lu": "celu",
    "ge_lu": "gelu",
    "si_lu": "silu",
    "log_sigmoid": "logsigmoid",
    "hard_tanh": "hardtanh",
    "hard_sigmoid": "hardsigmoid",
    "hard_swish": "hardswish",
    "tanh_shrink": "tanhshrink",
    "soft_shrink": "softshrink",
    "hard_shrink": "hardshrink",
    "soft_plus": "softplus",
    "soft_sign": "softsign",
    "soft_max": "softmax",
    "log_soft_max": "log_softmax",
    "batch_norm1d": "batch_norm",
    "batch_norm2d": "batch_norm",
    "batch_norm3d": "batch_norm",
    "instance_norm1d": "instance_norm",
    "instance_norm2d": "instance_norm",
    "instance_norm3d": "instance_norm",
    "r_m_s_norm": "rms_norm",
}


def _snake(name: str) -> str:
    """CamelCase -> snake_case the way the alias table spells it (BatchNorm2d -> batch_norm2d)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def cpp_name(name: str) -> str:
    """The C++ function's name: suffixed, so it never collides with (or recurses into) a C math
    function of the same name (``tanh``, ``erf``)."""
    return f"{name}_fn"


def cpp_function(name: str) -> str:
    """An element-wise operator as one line of C++ a kernel can paste and call per element, with
    PyTorch's defaults as default arguments: ``static inline float elu_fn(float v, float alpha =
    1.0f) { ... }``. Why a function, not only the expression: the embedded model, shown
    ``return F.gelu(x)``, wrote ``out0[i] = F.gelu(x[i])``; a C++ function with the operator's name
    turns that reflex into ``out0[i] = gelu_fn(x[i])``, which compiles and is right."""
    signature, expr = ELEMENTWISE[name]
    params = "".join(f", float {arg} = {float(value)!r}f" for arg, value in re.findall(r"(\w+)=(-?[0-9.]+)", signature))
    return f"static inline float {cpp_name(name)}(float v{params}) {{ using namespace std; return (float)({expr}); }}"
