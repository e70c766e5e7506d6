"""Kernel-only candidates: the model writes one C++ function, PRAGMA writes the module around it.

Why: a small model (the embedded 1.5B) writes a correct C++ loop far more often than correct
Python glue (ctypes argument types, allocation, the rules about torch in forward). In
``candidate_format=kernel`` the Coder is shown the exact C prototype of one ``extern "C"`` entry
point, derived from the problem's probed inputs and outputs, and replies with a C++ translation
unit only; :func:`module_source` wraps it into an ordinary ``ModelNew`` candidate (allocation with
``torch.empty``, ``.contiguous()`` inputs, ctypes argtypes, the call through ``pragma_cext``),
which goes through the same verifier and the same export to ``best.py`` as any module.

The prototype, for each forward input in order, then each output, then each constructor argument:
- tensor input ``x`` (rank r): ``const T* x, int64_t x_dim0, ..., int64_t x_dim{r-1}``
- output ``out0`` (rank r):    ``T* out0, int64_t out0_dim0, ...`` (PRAGMA allocates it, the kernel
  writes every element)
- scalar (forward or constructor argument): ``int64_t`` for int, ``double`` for float, ``bool``.

What falls back to ``module`` (:func:`unsupported_reason` says why, the Coder logs it):
- backend=gpu (Triton kernels are Python modules anyway);
- a problem probed without output descriptions (older worker, or a problem dict given by hand);
- an output that is not a tensor, or whose shape changes between two input draws (data-dependent
  shapes: the glue allocates outputs before the call);
- a reference with parameters or buffers whose constructor reads anything but its arguments,
  torch/nn and the problem's literal constants (``reference_constructor``): the weights are built by
  reusing that constructor (never forward) and passed to the kernel as ``const T*`` pointers after
  the inputs, with their sizes;
- inputs or constructor arguments that are neither tensors of a supported dtype nor int/float/bool.
Outputs are allocated at their probed shape (or ``empty_like`` an input of the same shape and
dtype), so the generated module is specialised to the problem's input shapes, as KernelBench
problems are; it raises a clear error when called with other shapes.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from pragma.knowledge import fast_forms

ENTRY = "pragma_kernel"
GLUE_MARKER = "# PRAGMA kernel-only candidate"

# torch dtype name -> (C++ element type, torch attribute). fp16/bf16 have no portable C++ type.
DTYPES = {
    "float32": "float",
    "float64": "double",
    "int64": "int64_t",
    "int32": "int32_t",
    "int16": "int16_t",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "bool": "bool",
}
# probe kind of a Python scalar -> (C++ type, ctypes type)
SCALARS = {
    "int": ("int64_t", "ctypes.c_int64"),
    "float": ("double", "ctypes.c_double"),
    "bool": ("bool", "ctypes.c_bool"),
}


class KernelSpecError(ValueError):
    """The problem cannot be described as one C entry point (the reason is one line)."""


def _arg_names(source: str, method: str, count: int, prefix: str) -> list[str]:
    """Parameter names of Model.<method> (after self) from the problem source, for readable
    prototypes; generic names when the source does not say (``*args``, a parse failure)."""
    names: list[str] = []
    try:
        tree = ast.parse(source)
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        fn = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == method)
        names = [a.arg for a in fn.args.args[1:]]
    except (SyntaxError, StopIteration):
        pass
    out = []
    for i in range(count):
        name = names[i] if i < len(names) else f"{prefix}{i}"
        if (
            not re.fullmatch(r"[A-Za-z_]\w*", name)
            or name in out
            or name.startswith("out")
            or name in ("ctypes", "torch", "nn", "self", "load_cpp", "ptr")
        ):
            name = f"{prefix}{i}"
        out.append(name)
    return out


def unsupported_reason(problem: dict[str, Any], backend: str = "cpu") -> str | None:
    """None when a kernel-only candidate can be wrapped for this problem, else why not."""
    try:
        kernel_spec(problem, backend)
    except KernelSpecError as exc:
        return str(exc)
    return None


def kernel_spec(problem: dict[str, Any], backend: str = "cpu") -> dict[str, Any]:
    """The entry point's arguments, from the probe (``tools/problem.py``). JSON-native."""
    if backend != "cpu":
        raise KernelSpecError(f"backend={backend} writes Triton modules; kernel-only candidates are C++ (cpu)")
    outputs, alt = problem.get("outputs"), problem.get("outputs_alt")
    if not outputs:
        raise KernelSpecError("the problem was probed without output descriptions")
    constructor = None
    if problem.get("state_names"):
        if "state" not in problem:
            raise KernelSpecError(
                "the reference has learned parameters/buffers "
                f"({', '.join(problem['state_names'][:3])}) and the probe did not describe them"
            )
        if len(problem["state"]) < len(problem["state_names"]) or len(problem["state"]) >= 20:
            raise KernelSpecError("the reference has too many parameters/buffers for one C signature")
        constructor = reference_constructor(problem.get("source", ""))
    items = outputs["items"]
    for i, y in enumerate(items):
        if y.get("kind") != "tensor":
            raise KernelSpecError(f"output {i} is a {y.get('kind')}, not a tensor")
        if y["dtype"] not in DTYPES:
            raise KernelSpecError(f"output {i} has dtype {y['dtype']}, which has no C++ element type here")
    if alt and [y.get("shape") for y in alt["items"]] != [y.get("shape") for y in items]:
        raise KernelSpecError("output shapes change with the input values (data-dependent shapes)")
    source = problem.get("source", "")
    args: list[dict[str, Any]] = []
    inputs = problem.get("inputs", [])
    for name, x in zip(_arg_names(source, "forward", len(inputs), "in"), inputs, strict=True):
        args.append(_input_arg(name, x, "input"))
    taken = {a["name"] for a in args}
    for t in problem.get("state", []) if constructor else []:
        if t.get("kind") != "tensor" or t["dtype"] not in DTYPES:
            raise KernelSpecError(
                f"parameter {t['name']} is a {t.get('dtype', t.get('kind'))} tensor, which has no C++ element type here"
            )
        cname = re.sub(r"\W", "_", t["name"])
        if cname in taken or cname.startswith("out"):
            cname = f"w_{cname}"
        taken.add(cname)
        args.append(
            {
                "role": "weight",
                "name": cname,
                "path": _attr_path(t["name"]),
                "state_name": t["name"],
                "dtype": t["dtype"],
                "shape": list(t["shape"]),
            }
        )
    for i, y in enumerate(items):
        args.append({"role": "output", "name": f"out{i}", "dtype": y["dtype"], "shape": list(y["shape"])})
    init = problem.get("init_inputs", [])
    for name, x in zip(_arg_names(source, "__init__", len(init), "arg"), init, strict=True):
        arg = _input_arg(name, x, "constructor argument")
        if arg["role"] != "scalar":
            raise KernelSpecError(f"constructor argument {name} is a tensor; only scalars are supported")
        arg["role"] = "init"
        args.append(arg)
    return {
        "entry": ENTRY,
        "args": args,
        "container": outputs.get("container", ""),
        "n_inputs": len(inputs),
        "n_init": len(init),
        "constructor": constructor,
    }


def _attr_path(state_name: str) -> str:
    """'layers.0.weight' -> 'self.layers[0].weight' (ModuleList/Sequential children are indexed)."""
    return "self" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in state_name.split("."))


# Names a copied constructor may read besides its own arguments and the problem's constants.
_CONSTRUCTOR_NAMES = frozenset(
    {
        "self",
        "super",
        "nn",
        "torch",
        "int",
        "float",
        "bool",
        "len",
        "range",
        "tuple",
        "list",
        "min",
        "max",
        "abs",
        "round",
        "True",
        "False",
        "None",
    }
)


def reference_constructor(source: str) -> dict[str, Any]:
    """Model.__init__ (arguments and body) and the module-level constants it reads, so the generated
    ModelNew builds the same parameters in the same order. The verifier seeds torch's RNG before
    every constructor, so the weights are equal; the kernel receives them as pointers and the layers
    are never called (the runtime no_torch_compute rule would reject that). Only the constructor is
    reused, never forward. Anything else it reads (helpers, other imports) is a fallback to module."""
    try:
        tree = ast.parse(source)
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        init = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    except (SyntaxError, StopIteration):
        raise KernelSpecError("the reference's constructor cannot be read") from None
    consts: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            consts[node.targets[0].id] = ast.unparse(node)
    params = {a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)}
    params |= {a.arg for a in (init.args.vararg, init.args.kwarg) if a is not None}
    body = [
        stmt for stmt in init.body if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
    ]  # docstring
    text = "\n".join(ast.unparse(stmt) for stmt in body).replace("super(Model, self)", "super()")
    used = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    unknown = sorted(used - params - _CONSTRUCTOR_NAMES - set(consts))
    if unknown:
        raise KernelSpecError(
            f"the reference's constructor reads {', '.join(unknown)}, which the generated module cannot reproduce"
        )
    return {"args": ast.unparse(init.args), "body": text, "constants": [consts[n] for n in consts if n in used]}


def _input_arg(name: str, x: dict[str, Any], what: str) -> dict[str, Any]:
    kind = x.get("kind")
    if kind == "tensor":
        if x["dtype"] not in DTYPES:
            raise KernelSpecError(f"{what} {name} has dtype {x['dtype']}, which has no C++ element type here")
        return {"role": "input", "name": name, "dtype": x["dtype"], "shape": list(x["shape"])}
    if kind in SCALARS:
        return {"role": "scalar", "name": name, "kind": kind, "value": x.get("value", "")}
    raise KernelSpecError(f"{what} {name} is a {kind}; only tensors and int/float/bool scalars can be passed")


def _dims(arg: dict[str, Any]) -> list[str]:
    return [f"{arg['name']}_dim{k}" for k in range(len(arg["shape"]))]


def prototype(spec: dict[str, Any]) -> str:
    """The head of the C function the model must write, one commented line per argument and no ``;``.
    Why no ``;``: shown a declaration, the embedded model's first kernels for layer_norm and
    group_norm were that declaration alone, ``;`` included (undefined symbol at load); the comments
    are short because it copies them into every reply (~5 output tokens/s on 2 cores)."""
    lines = []
    for a in spec["args"]:
        if a["role"] in ("input", "output", "weight"):
            const = "" if a["role"] == "output" else "const "
            shape = " x ".join(str(n) for n in a["shape"]) or "scalar (0-dim)"
            what = {
                "input": "input",
                "output": "output: write every element",
                "weight": f"the reference's {a.get('state_name')}",
            }[a["role"]]
            dims = "".join(f", int64_t {d}" for d in _dims(a))
            lines.append((f"{const}{DTYPES[a['dtype']]}* {a['name']}{dims}", f"{what}, {a['dtype']} [{shape}]"))
        else:
            ctype = SCALARS[a["kind"]][0]
            src = "forward argument" if a["role"] == "scalar" else "constructor argument"
            lines.append((f"{ctype} {a['name']}", f"{src}, e.g. {a['value']}"))
    body = "\n".join(
        f"    {decl}{',' if i < len(lines) - 1 else ''}  // {note}" for i, (decl, note) in enumerate(lines)
    )
    return f'extern "C" void {spec["entry"]}(\n{body}\n)'


def _argtypes(spec: dict[str, Any]) -> list[str]:
    types: list[str] = []
    for a in spec["args"]:
        if a["role"] in ("input", "output", "weight"):
            types += ["ctypes.c_void_p"] + ["ctypes.c_int64"] * len(a["shape"])
        else:
            types.append(SCALARS[a["kind"]][1])
    return types


def _py_string(text: str) -> str:
    # A raw triple-quoted literal keeps best.py readable; repr() when the source could break it.
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''\n" + text + "'''"
    return repr(text)


def compiled_source(cpp: str) -> str:
    """The exact ``CPP_SOURCE`` string the generated module passes to ``load_cpp`` (the build
    cache's key: a prebuild must compile this very string)."""
    return str(ast.literal_eval(_py_string(cpp.strip("\n") + "\n")))


def module_source(spec: dict[str, Any], cpp: str) -> str:
    """The ``ModelNew`` module around the C++ translation unit ``cpp`` (an ordinary candidate)."""
    inputs = [a for a in spec["args"] if a["role"] in ("input", "scalar")]
    outputs = [a for a in spec["args"] if a["role"] == "output"]
    inits = [a for a in spec["args"] if a["role"] == "init"]
    tensors = [a for a in inputs if a["role"] == "input"]
    # Outputs shaped like an input (same shape and dtype) follow that input's size; the others are
    # fixed at the probed shape, so the module checks that it is called with the probed shapes.
    like = {
        o["name"]: next((t["name"] for t in tensors if t["shape"] == o["shape"] and t["dtype"] == o["dtype"]), None)
        for o in outputs
    }
    fixed = any(v is None for v in like.values())
    ctor = spec.get("constructor")
    # With learned weights the reference's constructor is reused (reference_constructor); the
    # constructor scalars are then kept under names it cannot already use.
    init_attr = {a["name"]: (f"self.pragma_{a['name']}" if ctor else f"self.{a['name']}") for a in inits}
    if ctor:
        init_lines = [
            f"    def __init__({ctor['args']}):",
            *["        " + line for line in ctor["body"].splitlines()],
            *[f"        {init_attr[a['name']]} = {a['name']}" for a in inits],
        ]
    else:
        init_lines = [
            f"    def __init__(self{''.join(', ' + a['name'] for a in inits)}):",
            "        super().__init__()",
            *[f"        {init_attr[a['name']]} = {a['name']}" for a in inits],
        ]
    lines = [
        f"{GLUE_MARKER} (candidate_format=kernel): the model wrote CPP_SOURCE, PRAGMA this module.",
        "import ctypes",
        "",
        "import torch",
        "import torch.nn as nn",
        "from pragma_cext import load_cpp, ptr",
        "",
        *(
            [
                "# The reference's constants its constructor reads (the weights are built as it builds them).",
                *ctor["constants"],
                "",
            ]
            if ctor and ctor["constants"]
            else []
        ),
        f"CPP_SOURCE = {_py_string(cpp.strip(chr(10)) + chr(10))}",
        "",
        f'_lib = load_cpp(CPP_SOURCE, name="{spec["entry"]}")',
        f"_lib.{spec['entry']}.argtypes = [{', '.join(_argtypes(spec))}]",
        f"_lib.{spec['entry']}.restype = None",
        "",
        "",
        "class ModelNew(nn.Module):",
        *init_lines,
        "",
        f"    def forward(self{''.join(', ' + a['name'] for a in inputs)}):",
    ]
    for t in tensors:
        lines.append(f"        {t['name']} = {t['name']}.contiguous()")
        lines.append(f"        if {t['name']}.dtype != torch.{t['dtype']}:")
        lines.append(f'            raise TypeError("{t["name"]} must be {t["dtype"]}, got " + str({t["name"]}.dtype))')
        if fixed:
            lines.append(f"        if tuple({t['name']}.shape) != {tuple(t['shape'])!r}:")
            lines.append(
                f'            raise ValueError("this kernel was generated for {t["name"]} of shape '
                f'{tuple(t["shape"])}, got " + str(tuple({t["name"]}.shape)))'
            )
    for o in outputs:
        if like[o["name"]]:
            lines.append(f"        {o['name']} = torch.empty_like({like[o['name']]})")
        else:
            lines.append(f"        {o['name']} = torch.empty({tuple(o['shape'])!r}, dtype=torch.{o['dtype']})")
    call: list[str] = []
    for a in spec["args"]:
        if a["role"] in ("input", "output"):
            call.append(f"ptr({a['name']})")
            call += [f"{a['name']}.shape[{k}]" for k in range(len(a["shape"]))]
        elif a["role"] == "weight":
            call.append(f"ptr({a['path']})")
            call += [str(n) for n in a["shape"]]
        elif a["role"] == "scalar":
            call.append(a["name"])
        else:
            call.append(init_attr[a["name"]])
    lines.append(f"        _lib.{spec['entry']}({', '.join(call)})")
    names = ", ".join(o["name"] for o in outputs)
    if not spec.get("container"):
        lines.append(f"        return {names}")
    elif spec["container"] == "list":
        lines.append(f"        return [{names}]")
    else:
        lines.append(f"        return ({names},)" if len(outputs) == 1 else f"        return ({names})")
    return "\n".join(lines) + "\n"


def is_glue(code: str) -> bool:
    return code.startswith(GLUE_MARKER)


def kernel_of(code: str) -> str | None:
    """The C++ source the model wrote inside a module this file generated (PRAGMA's fast forms left
    out; None for any other module)."""
    if not is_glue(code):
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "CPP_SOURCE"
            and isinstance(node.value, ast.Constant)
        ):
            return without_fast_forms(str(node.value.value).lstrip("\n"))
    return None


FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
CPP_LANGS = ("", "cpp", "c++", "cxx", "cc", "c", "h", "hpp")


class KernelExtractionError(ValueError):
    """The reply holds no C++ block defining the entry point."""


# Headers a kernel's C++ may use without naming them: small models write std::exp or
# std::max and forget the include (the embedded model's sigmoid failed to compile twice in four
# attempts on "'exp' is not a member of 'std'"). Including them changes nothing else.
STANDARD_HEADERS = ("<cmath>", "<cstdint>", "<cstddef>", "<cstring>", "<algorithm>", "<limits>")
# x86 intrinsics (__m256, _mm512_add_ps, __mmask16) need <immintrin.h>: the embedded model wrote them
# without it twice in four attempts ("'__m256' does not name a type"), and the repair did not add it.
# Comments aside: a kernel that only mentions an intrinsic in a comment needs no header.
_INTRINSICS = re.compile(r"\b(?:__m(?:64|128|256|512)[dhi]?|__mmask(?:8|16|32|64)|_mm(?:256|512)?_\w+)\b")
INTRINSICS_HEADER = "<immintrin.h>"


def with_standard_headers(cpp: str) -> str:
    """``cpp`` with the standard headers it does not include yet prepended, and <immintrin.h> where
    it uses x86 intrinsics without it (or without <x86intrin.h>, which includes it)."""
    missing = [h for h in STANDARD_HEADERS if not re.search(rf"#\s*include\s*{re.escape(h)}", cpp)]
    if _INTRINSICS.search(_NOT_CODE.sub("", cpp)) and not re.search(r"#\s*include\s*<(?:imm|x86)intrin\.h>", cpp):
        missing.append(INTRINSICS_HEADER)
    return "".join(f"#include {h}\n" for h in missing) + cpp if missing else cpp


# Comments, string and character literals: their braces are not the code's.
_NOT_CODE = fast_forms.NOT_CODE


def with_closed_braces(cpp: str) -> str:
    """``cpp`` with the closing braces its end lacks appended. Why: told to paste a loop as a
    function's body, the embedded model ended the function with the loop's own brace, four times
    in a row for l2_normalize ("expected '}' at end of input"). A missing brace at the end has one
    reading; what it closes is then verified like any other code."""
    code = _NOT_CODE.sub("", cpp)
    missing = code.count("{") - code.count("}")
    return cpp + "}\n" * missing if missing > 0 else cpp


# PRAGMA's fast forms before a kernel that calls them (knowledge/fast_forms.prelude_for), between
# these lines; ``#line 1`` after them keeps the compiler's line numbers those of the model's code.
PRELUDE_BEGIN = "// --- PRAGMA's fast forms, added before the kernel that calls them (knowledge/fast_forms.py) ---"
PRELUDE_END = "// --- end of PRAGMA's fast forms ---"
_FAST_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*["<]pragma_fast\.h[">][^\n]*$', re.M)
FAST_INCLUDE_DONE = "// pragma_fast.h: PRAGMA defines the forms this kernel calls above"
_PRELUDE = re.compile(re.escape(PRELUDE_BEGIN) + r".*?" + re.escape(PRELUDE_END) + r"\n#line 1\n", re.DOTALL)


def with_fast_forms(cpp: str) -> str:
    """``cpp`` after the definitions of the fast forms it calls without defining (the kernel-format
    prompt declares them: the embedded model garbled the helpers it was asked to copy). Its own
    declarations of those functions are blanked (a repeated default argument would not compile)."""
    # The prompt's `#include "pragma_fast.h"` names no file: a comment in its line (kept, so line
    # numbers hold; without_fast_forms turns it back into the include the model wrote).
    cpp = _FAST_INCLUDE.sub(FAST_INCLUDE_DONE, cpp)
    prelude = fast_forms.prelude_for(cpp)
    if not prelude:
        return cpp
    names = "|".join(n for n in fast_forms.PROVIDED if re.search(rf"\b{n}\b", cpp))
    # Its own declarations of those functions: blanked (the line stays, so line numbers still match).
    cpp = re.sub(
        rf"^[ \t]*(?:static[ \t]+)?(?:inline[ \t]+)?float[ \t]+(?:{names})[ \t]*\([^;{{}}]*\)[ \t]*;[^\n]*$",
        "",
        cpp,
        flags=re.M,
    )
    return f"{PRELUDE_BEGIN}\n{prelude}\n{PRELUDE_END}\n#line 1\n{cpp}"


# An OpenMP collapse clause: `collapse(2)`, `collapse(TILE)`.
_COLLAPSE = re.compile(r"^([ \t]*#[ \t]*pragma[ \t]+omp\b[^\n]*?)[ \t]*\bcollapse[ \t]*\([ \t]*\w+[ \t]*\)", re.M)


def without_collapse(cpp: str) -> str:
    """``cpp`` without the ``collapse(...)`` clauses of its OpenMP pragmas. Only for a kernel that runs
    on one thread, where collapsing loops changes nothing but the index arithmetic: the embedded model
    put collapse over loops that are not perfectly nested in 23 of the 57 compile errors of the
    emb1128b run (log_softmax six times in a row), whatever the repair hint said."""
    return _COLLAPSE.sub(r"\1", cpp)


def without_fast_forms(cpp: str) -> str:
    """``cpp`` as the model wrote it: PRAGMA's prelude of fast forms removed, its include back."""
    return _PRELUDE.sub("", cpp, count=1).replace(FAST_INCLUDE_DONE, '#include "pragma_fast.h"')


def extract_kernel(reply: str, entry: str = ENTRY) -> str:
    """The last fenced C/C++ block that defines ``entry`` (an unterminated last fence counts: a
    reply cut at max_tokens may still hold the whole function), with the standard headers and
    the closing braces its end lacks."""
    from pragma.tools.extract import strip_reasoning

    text = strip_reasoning(reply)
    blocks = [body for lang, body in FENCE.findall(text) if lang.lower() in CPP_LANGS and entry in body]
    if blocks:
        return with_closed_braces(with_standard_headers(blocks[-1].strip() + "\n"))
    if entry in text and "```" not in text and "{" in text:
        return with_closed_braces(with_standard_headers(text.strip() + "\n"))  # bare code, no fence
    raise KernelExtractionError(f'the reply contains no C++ code block defining extern "C" void {entry}(...)')
