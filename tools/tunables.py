"""Tunables: the parameters a kernel declares for the tuner (nodes/tune.py), and build knobs.

Syntax (in the C++, in either candidate format; a module's ``CPP_SOURCE`` string holds it too)::

    constexpr int TILE = 64;  // tune: 16 32 64 128

One declaration per line: ``[static] constexpr|const TYPE NAME = VALUE; // tune: V1 V2 ...``.
The candidate values are numeric literals (``-?digits[.digits][suffix]``), separated by spaces or
commas; the declared ``VALUE`` is the default and joins the list when missing. Anything else on
the line (an expression, an identifier value) declares nothing: the tuner only ever substitutes a
number for a number, so a variant differs from its parent in one literal and nothing else.

Build knobs apply to any kernel built through ``pragma_cext.load_cpp``/``build_cpp`` whose calls
pass no ``extra_flags`` yet: the preferred vector width (``-mprefer-vector-width``) and loop
unrolling (``-funroll-loops``). Both leave the arithmetic as written (no reassociation, unlike
-ffast-math, which the verifier rejects anyway); the flags become part of the build cache's key.
The OpenMP schedule is not a knob: it would need ``schedule(runtime)`` in the kernel and the
environment at run time, which best.py does not carry.

Pure: text in, text out (no file, process or import of the kernel).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

# A numeric C++ literal: the only thing a tunable's value may be.
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?[fFuUlL]*"
_DECL = re.compile(
    r"^(?P<head>[ \t]*(?:static[ \t]+)?(?:constexpr|const)[ \t]+[A-Za-z_][\w:]*(?:[ \t]+[A-Za-z_][\w:]*)?"
    r"[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]*=[ \t]*)(?P<value>" + _NUMBER + r")(?P<mid>[ \t]*;[ \t]*//[ \t]*tune:)"
    r"(?P<values>[^\n]*)$",
    re.M,
)
_VALUE = re.compile(r"^" + _NUMBER + r"$")

# Build knobs: name -> (values, flags per value). "default" adds no flag.
VECTOR_WIDTH = "build:vector_width"
UNROLL = "build:unroll"
_FLAG_OF = {
    (VECTOR_WIDTH, "256"): "-mprefer-vector-width=256",
    (VECTOR_WIDTH, "512"): "-mprefer-vector-width=512",
    (UNROLL, "on"): "-funroll-loops",
}
_BUILD_CALLS = ("load_cpp", "build_cpp")


@dataclass(frozen=True)
class Tunable:
    name: str
    default: str
    values: tuple[str, ...]  # in the order declared, the default included

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "tunable", "default": self.default, "values": list(self.values)}


def parse(code: str) -> list[Tunable]:
    """Every tunable declared in ``code``, in order of appearance (a name declared twice: the first).

    Lines whose values do not parse are ignored, as are tunables with a single value."""
    found: dict[str, Tunable] = {}
    for m in _DECL.finditer(code):
        name, default = m.group("name"), m.group("value")
        values = [v for v in re.split(r"[\s,]+", m.group("values").strip()) if v]
        if not values or not all(_VALUE.match(v) for v in values) or name in found:
            continue
        if default not in values:
            values.append(default)
        # Numeric order, so "one step up" means a larger value whatever order they were listed in.
        values = sorted(dict.fromkeys(values), key=lambda v: float(v.rstrip("fFuUlL")))
        if len(values) > 1:
            found[name] = Tunable(name, default, tuple(values))
    return list(found.values())


def build_knobs(code: str, has_avx512: bool) -> list[dict[str, Any]]:
    """The build knobs that apply to ``code`` (none when it builds no C++ through pragma_cext, or
    when a build call already passes flags: the kernel's own choice is kept)."""
    if not _build_call_sites(code):
        return []
    knobs = [{"name": UNROLL, "kind": "build", "default": "off", "values": ["off", "on"]}]
    # The default build already prefers 512 bits (tools/inside/cext.DEFAULT_FLAGS), and on an AVX2
    # machine 256 is the widest whatever the flag says: only 256 on an AVX-512 machine builds
    # something new. A "512" variant was the default's binary timed again (one variant per sweep).
    if has_avx512:
        knobs.insert(0, {"name": VECTOR_WIDTH, "kind": "build", "default": "default", "values": ["default", "256"]})
    return knobs


def build_requests(code: str) -> list[dict[str, Any]]:
    """What each build call of a module compiles: ``{source, name, flags}``, for a prebuild into
    the build cache (the same strings load_cpp will hash). Calls whose source is not a literal
    string (or a module-level name bound to one) are left to the import, which builds them anyway."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    strings = {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name not in _BUILD_CALLS:
            continue
        first = node.args[0]
        source = strings.get(first.id) if isinstance(first, ast.Name) else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            source = first.value
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        try:
            flags = list(ast.literal_eval(kw["extra_flags"])) if "extra_flags" in kw else []
            lib = ast.literal_eval(kw["name"]) if "name" in kw else "kernel"
        except ValueError:
            continue
        if source is not None and isinstance(lib, str):
            out.append({"source": source, "name": lib, "flags": [str(f) for f in flags]})
    return out


def flags_for(params: dict[str, str]) -> list[str]:
    """The g++ flags of a point's build knobs, in a fixed order (part of the cache key)."""
    return [_FLAG_OF[(k, params[k])] for k in (VECTOR_WIDTH, UNROLL) if (k, params.get(k, "")) in _FLAG_OF]


def _build_call_sites(code: str) -> list[ast.Call] | None:
    """The load_cpp/build_cpp calls of a module, or None when flags cannot be added to all of them."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in _BUILD_CALLS:
                if len(node.args) != 1 or any(k.arg in ("extra_flags", None) for k in node.keywords):
                    return None  # flags already chosen (or passed in a way we do not rewrite)
                calls.append(node)
    return calls or None


def with_flags(code: str, flags: list[str]) -> str:
    """``code`` with ``extra_flags=(...)`` added to each of its build calls; unchanged without flags."""
    if not flags:
        return code
    calls = _build_call_sites(code)
    if not calls:
        raise ValueError("the kernel has no build call that takes flags")
    lines = code.splitlines(keepends=True)
    # Insert from the last call back, so earlier positions stay valid.
    for call in sorted(calls, key=lambda c: (c.end_lineno, c.end_col_offset), reverse=True):
        row, col = call.end_lineno - 1, call.end_col_offset - 1  # the closing parenthesis
        raw = lines[row].encode()  # ast offsets count UTF-8 bytes
        head, tail = raw[:col].decode(), raw[col:].decode()
        before = "".join(lines[:row]) + head
        sep = " " if before.rstrip().endswith(",") else ", "
        lines[row] = head + f"{sep}extra_flags={tuple(flags)!r}" + tail
    out = "".join(lines)
    ast.parse(out)  # a rewrite that does not parse is a bug here, not a variant
    return out


def with_values(code: str, values: dict[str, str]) -> str:
    """``code`` with each named tunable's declared value replaced (the tune comment is kept)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in values:
            return m.group(0)
        if not _VALUE.match(values[name]):
            raise ValueError(f"tunable {name}: {values[name]!r} is not a numeric literal")
        return m.group("head") + values[name] + m.group("mid") + m.group("values")

    return _DECL.sub(sub, code)


def variant(code: str, params: dict[str, str]) -> str:
    """The source of the point ``params`` (tunables by name, build knobs by their ``build:`` name)."""
    tuned = with_values(code, {k: v for k, v in params.items() if not k.startswith(("build:", "rewrite:"))})
    return with_flags(tuned, flags_for(params))


def dimensions(code: str, *, has_avx512: bool, build: bool) -> list[dict[str, Any]]:
    """The sweep's dimensions for ``code``: its tunables, then (``build``) the build knobs."""
    dims = [t.to_dict() for t in parse(code)]
    return dims + (build_knobs(code, has_avx512) if build else [])


def label(name: str) -> str:
    """A dimension's name as reports print it: ``build:vector_width`` -> ``vector_width``,
    ``rewrite:streaming`` -> ``streaming``, a tunable's as declared."""
    return name.split(":")[-1]


def describe(params: dict[str, str], dims: list[dict[str, Any]] | None = None) -> str:
    """TILE=32 vector_width=512: the point's non-default values (all of them without ``dims``)."""
    defaults = {d["name"]: d["default"] for d in dims or []}
    shown = [f"{label(k)}={v}" for k, v in params.items() if defaults.get(k) != v]
    return " ".join(shown) or "defaults"
