"""Anti-cheat rules: the static layer (the registry, every rule with its rationale, is ``rules.py``).

The static layer reads the candidate's source (Python AST, plus the C++ strings inside it with
comments stripped) without running anything. The runtime layer lives in the judge (``judging/``: verdicts
from data the judge owns) and ``inside/guards.py`` (advisory checks in the candidate's process) and
reports under the same rule names where a rule has both forms. Static checks are cheap and explain themselves; runtime checks catch what a static
reading cannot see (operators on tensors, obfuscated calls, C++ behaviour).

Threat model: candidates are LLM-written code that may game the evaluator, including on purpose;
the verdict is made in the judge process, which never runs candidate code (docs/verifier.md).
"""

from __future__ import annotations

import ast
from typing import Any

# The registry, re-exported: callers reach the rules through this module as before.
from pragma.tools.judging.rules import (  # noqa: F401
    AUDITED_CALLS,
    COMPILED_CODE_RAN,
    DETERMINISTIC,
    FAIR_SCHEDULING,
    FP_ENVIRONMENT,
    FRESH_OUTPUT,
    HAS_COMPILED_KERNEL,
    INPUTS_UNMODIFIED,
    MEMORY_LIMIT,
    NO_DYNAMIC_CODE,
    NO_FAST_MATH,
    NO_FILESYSTEM_WRITES,
    NO_INTROSPECTION,
    NO_LIBRARY_COMPUTE,
    NO_MONKEYPATCHING,
    NO_NETWORK,
    NO_PRECISION_DOWNGRADE,
    NO_REFERENCE_MODEL,
    NO_SIDE_STREAMS,
    NO_STATE_ACROSS_CALLS,
    NO_TENSOR_SUBCLASS,
    NO_THREADS_OR_PROCESSES,
    NO_TORCH_COMPUTE,
    NO_TRY_FALLBACK,
    NOISY_NEIGHBOUR,
    OUTPUT_MATERIALISED,
    OUTPUT_STABLE,
    PLAIN_DENSE_OUTPUT,
    RULES,
    SPEEDUP_PLAUSIBLE,
    STATELESS,
    STRESS_INPUTS,
    THREAD_BUDGET,
    TOLERANCE_DISCRIMINATES,
    Rule,
)

# The static layer's tables (static_tables.py); STATIC_RULES and the public tables are re-exported.
from pragma.tools.judging.static_tables import (  # noqa: F401
    _BAD_FLAG,
    _CPP_HINT,
    _CPP_RULES,
    _FILE_CALLS,
    _HALF_DTYPES,
    _HALF_PROBLEM,
    _IMPORT_RULES,
    _INTROSPECTION_ATTRS,
    _MUTATING_METHODS,
    _NN_LAYER,
    _PATH_WRITE_METHODS,
    _PROCESS_CALLS,
    _STREAM_CALLS,
    _TRITON_HALF,
    KERNEL_BUILDERS,
    LOADERS,
    STATIC_RULES,
    TENSOR_COMPUTE_METHODS,
    TORCH_ALLOWED_CALLS,
    _tf32_dot,
    strip_cpp_comments,
)

# --- static layer -----------------------------------------------------------------------------


class _Scanner(ast.NodeVisitor):
    """One pass over the candidate's AST; records (rule, detail) for every violation."""

    def __init__(self, tree: ast.Module, problem_is_half: bool, backend: str = "cpu"):
        self.problem_is_half = problem_is_half
        self.backend = backend
        self.found: list[tuple[str, str]] = []
        self.aliases: dict[str, str] = {}  # local name -> dotted module path or object path
        self.lib_handles: set[str] = set()  # "name" or "self.name" bound to a loaded library
        self.module_names: set[str] = set()  # names assigned at module level
        self.has_kernel = False
        self._func_stack: list[ast.AST] = []
        self._taint_cache: dict[int, set[str]] = {}  # id(function) -> names derived from its arguments
        # Inside a @triton.jit body, `a @ b` and tensor methods (x.sum(), acc.to()) are Triton
        # operations compiled into the kernel, not torch compute.
        self._triton_depth = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                if (self.qualname(node.value.func) or "") in LOADERS:
                    self.lib_handles.update(k for t in node.targets if (k := self._handle_key(t)))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.module_names.add(node.name)  # function attributes can hold a cache too
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else ([node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
            )
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self.module_names.add(n.id)

    # helpers
    def add(self, rule: str, node: ast.AST, what: str) -> None:
        self.found.append((rule, f"line {getattr(node, 'lineno', '?')}: {what}"))

    def qualname(self, node: ast.AST) -> str | None:
        """Dotted path of a Name/Attribute chain rooted at an import, else None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    @staticmethod
    def _handle_key(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}"
        return None

    def _rooted_at_handle(self, node: ast.AST) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            if self._handle_key(node) in self.lib_handles:
                return True
            node = node.func if isinstance(node, ast.Call) else node.value
        return self._handle_key(node) in self.lib_handles

    def _in_stateful_method(self) -> bool:
        """Inside a function that runs per call (anything but __init__ / module level)."""
        return bool(self._func_stack) and not any(
            isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__init__" for f in self._func_stack
        )

    def _import_rule(self, module: str, node: ast.AST) -> None:
        for rule, roots in _IMPORT_RULES.items():
            for root in roots:
                if module == root or module.startswith(root + "."):
                    self.add(rule, node, f"imports {module}")

    # visitors
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._import_rule(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._import_rule(module, node)
        for a in node.names:
            full = f"{module}.{a.name}"
            self._import_rule(full, node)
            if module == "torch.nn.functional" or (module == "torch" and a.name in TENSOR_COMPUTE_METHODS):
                self.add(NO_TORCH_COMPUTE, node, f"imports the torch compute function {full}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "Model":
            self.add(NO_REFERENCE_MODEL, node, "defines a class named Model (a copy of the reference)")
        for base in node.bases:
            q = self.qualname(base) or ""
            last = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            if last == "Model" or q.endswith(".Model"):
                self.add(NO_REFERENCE_MODEL, node, f"class {node.name} subclasses the reference Model")
            if q in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase") or last == "Tensor":
                self.add(NO_TENSOR_SUBCLASS, node, f"class {node.name} subclasses torch.Tensor")
        self.generic_visit(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add(NO_TENSOR_SUBCLASS, node, f"defines {node.name}")
        is_triton_kernel = False
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            q = self.qualname(target) or ""
            if q == "triton.jit" and self.backend == "gpu":
                self.has_kernel = True
            is_triton_kernel = is_triton_kernel or q == "triton.jit"
            if q in ("functools.lru_cache", "functools.cache", "functools.cached_property"):
                self.add(NO_STATE_ACROSS_CALLS, node, f"{node.name} is memoized with {q}")
        self._func_stack.append(node)
        self._triton_depth += is_triton_kernel
        self.generic_visit(node)
        self._triton_depth -= is_triton_kernel
        self._func_stack.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_Global(self, node: ast.Global) -> None:
        self.add(NO_STATE_ACROSS_CALLS, node, f"global {', '.join(node.names)}")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add(NO_STATE_ACROSS_CALLS, node, f"nonlocal {', '.join(node.names)}")

    def visit_Try(self, node: ast.Try) -> None:
        for handler in node.handlers:
            if not (handler.body and isinstance(handler.body[-1], ast.Raise)):
                self.add(NO_TRY_FALLBACK, handler, "an except branch that does not re-raise")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def _check_store(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_store(t, node)
            return
        if isinstance(target, ast.Starred):
            self._check_store(target.value, node)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            owner = self.qualname(target.value)
            if owner:
                self.add(NO_MONKEYPATCHING, node, f"assigns into {owner}")
                return
            root = target
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if self._in_stateful_method() and isinstance(root, ast.Name):
                if (root.id == "self" or root.id in self.module_names) and not self._parameter_only(target, node):
                    self.add(NO_STATE_ACROSS_CALLS, node, f"stores into {ast.unparse(target)} during a call")

    @staticmethod
    def _names(node: ast.AST | None) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()

    def _tainted(self, fn: ast.AST) -> set[str]:
        """Names in ``fn`` that may hold a value derived from its arguments (other than self): what
        an argument is assigned, iterated or bound into, and every plain name a call receives beside
        a tainted one (a kernel writes its output through a pointer: ``f(ptr(x), ptr(y))`` taints y)."""
        key = id(fn)
        if key in self._taint_cache:
            return self._taint_cache[key]
        a = fn.args if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else None
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])] if a else []
        tainted = {p.arg for p in params if p.arg not in ("self", "cls")}
        functions = {"self", *self.module_names}
        flows: list[tuple[set[str], set[str]]] = []  # (names read, names that may receive them)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                sinks = {t.id for t in node.targets for t in ast.walk(t) if isinstance(t, ast.Name)}
                flows.append((self._names(node.value), sinks - functions))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                flows.append((self._names(node.value), self._names(node.target) - functions))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                flows.append((self._names(node.iter), self._names(node.target) - functions))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                flows.append((self._names(node.context_expr), self._names(node.optional_vars) - functions))
            elif isinstance(node, ast.Call):
                receivers = (
                    {node.func.value.id}
                    if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    else set()
                )
                args = set().union(*(self._names(x) for x in [*node.args, *(k.value for k in node.keywords)]))
                flows.append((args | receivers, (args | receivers) - functions))
        changed = True
        while changed:
            changed = False
            for reads, sinks in flows:
                if reads & tainted and not sinks <= tainted:
                    tainted |= sinks
                    changed = True
        self._taint_cache[key] = tainted
        return tainted

    def _parameter_only(self, target: ast.AST, node: ast.AST) -> bool:
        """A per-call store that keeps state depending only on the module's parameters: a plain
        assignment of a value computed from ``self``'s attributes (weights packed once, on the first
        call), reading no argument of the call, nothing derived from one, and not its own old value.
        Why allowed: it is what a kernel that packs its weights does, and it cannot memoize an input.
        Still refused: augmented assignments and deletions, constants (a flag that switches
        behaviour after the first call), self-updates (counters), anything touching an input."""
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None or not self._func_stack:
            return False
        value = node.value
        if not self._names(value):  # constants only: a flag or a counter's reset
            return False
        if ast.unparse(target) in {ast.unparse(n) for n in ast.walk(value) if isinstance(n, ast.Attribute)}:
            return False
        tainted = self._tainted(self._func_stack[-1])
        return not (self._names(value) & tainted) and not (self._names(target) & tainted)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_store(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_store(t, node)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self._triton_depth:
            self.add(NO_TORCH_COMPUTE, node, "uses the @ operator (a torch matmul)")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        q = self.qualname(node) or ""
        if (q in _HALF_DTYPES or _TRITON_HALF.match(q)) and not self.problem_is_half:
            self.add(NO_PRECISION_DOWNGRADE, node, f"uses {q} in an fp32 problem")
        if node.attr in _INTROSPECTION_ATTRS or q == "sys.modules":
            self.add(NO_INTROSPECTION, node, f"accesses {q or '.' + node.attr}")
        if node.attr == "__dict__" and self.qualname(node.value):
            self.add(NO_DYNAMIC_CODE, node, f"reads {self.qualname(node.value)}.__dict__")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "pragma_problem"):
            rule = NO_REFERENCE_MODEL if node.id == "pragma_problem" else NO_INTROSPECTION
            self.add(rule, node, f"refers to {node.id}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        q = self.qualname(node.func)
        if q:
            self._check_qualified_call(q, node)
        elif isinstance(node.func, ast.Name):
            self._check_builtin_call(node.func.id, node)
        elif isinstance(node.func, ast.Attribute):
            self._check_method_call(node.func, node)
        self.generic_visit(node)

    def _check_qualified_call(self, q: str, node: ast.Call) -> None:
        if q in KERNEL_BUILDERS:
            self.has_kernel = True
        if q in _STREAM_CALLS:
            self.add(NO_SIDE_STREAMS, node, f"calls {q} (work on another CUDA stream escapes the timer)")
        if q == "triton.language.dot" and self.backend == "gpu" and not self.problem_is_half:
            if why := _tf32_dot(node):
                self.add(NO_PRECISION_DOWNGRADE, node, why)
        if q.startswith("torch."):
            rest = q[len("torch.") :]
            if not (rest in TORCH_ALLOWED_CALLS or _NN_LAYER.match(rest) or rest.startswith("utils.cpp_extension.")):
                self.add(NO_TORCH_COMPUTE, node, f"calls {q}")
            if rest in ("set_num_threads", "set_num_interop_threads", "set_flush_denormal"):
                self.add(
                    THREAD_BUDGET if "threads" in rest else FP_ENVIRONMENT,
                    node,
                    f"calls {q} (a process-wide setting the reference shares)",
                )
        if _PROCESS_CALLS.match(q):
            self.add(NO_THREADS_OR_PROCESSES, node, f"calls {q}")
        if _FILE_CALLS.match(q) or q in ("io.open", "os.open") and self._write_mode(node, os_open=q == "os.open"):
            self.add(NO_FILESYSTEM_WRITES, node, f"calls {q}")
        if q in ("builtins.setattr", "builtins.delattr"):
            self.add(NO_MONKEYPATCHING, node, f"calls {q}")
        if q.startswith(("gc.", "inspect.", "sys._getframe", "sys.settrace", "sys.setprofile")):
            self.add(NO_INTROSPECTION, node, f"calls {q}")
        if q == "contextlib.suppress":
            self.add(NO_TRY_FALLBACK, node, "uses contextlib.suppress")
        if q.startswith("importlib."):
            self.add(NO_DYNAMIC_CODE, node, f"calls {q}")
        if q in ("os.environ.update", "os.putenv", "os.environ.setdefault", "os.unsetenv"):
            self.add(NO_MONKEYPATCHING, node, f"calls {q} (environment)")

    def _check_builtin_call(self, name: str, node: ast.Call) -> None:
        if name in self.aliases:
            return
        if name in ("eval", "exec", "compile", "__import__"):
            self.add(NO_DYNAMIC_CODE, node, f"calls {name}()")
        elif name in ("globals", "locals", "vars"):
            self.add(NO_INTROSPECTION, node, f"calls {name}()")
        elif name in ("setattr", "delattr") and node.args:
            owner = self.qualname(node.args[0])
            if owner:
                self.add(NO_MONKEYPATCHING, node, f"{name}() on {owner}")
        elif name == "getattr" and len(node.args) >= 2 and self.qualname(node.args[0]):
            if not isinstance(node.args[1], ast.Constant):
                self.add(NO_DYNAMIC_CODE, node, f"getattr on {self.qualname(node.args[0])} with a computed name")
            else:
                self._check_qualified_call(f"{self.qualname(node.args[0])}.{node.args[1].value}", node)
        elif name == "open" and self._write_mode(node):
            self.add(NO_FILESYSTEM_WRITES, node, "opens a file for writing")

    def _check_method_call(self, func: ast.Attribute, node: ast.Call) -> None:
        name = func.attr
        if self._rooted_at_handle(func.value):
            return  # a call into the candidate's own compiled library
        if isinstance(func.value, ast.Name) and func.value.id == "self" and name in TENSOR_COMPUTE_METHODS:
            return  # self.<submodule>(x): its forward is the candidate's own code (checked at runtime)
        if name in TENSOR_COMPUTE_METHODS and not self._triton_depth:
            self.add(NO_TORCH_COMPUTE, node, f"calls .{name}() (torch compute on a tensor)")
        if name in ("half", "bfloat16") and not self.problem_is_half:
            self.add(NO_PRECISION_DOWNGRADE, node, f"calls .{name}() in an fp32 problem")
        if name in ("as_subclass", "_make_subclass", "_make_wrapper_subclass"):
            self.add(NO_TENSOR_SUBCLASS, node, f"calls .{name}()")
        if name in _PATH_WRITE_METHODS:
            self.add(NO_FILESYSTEM_WRITES, node, f"calls .{name}()")
        if name in _MUTATING_METHODS and self._in_stateful_method():
            root = func.value
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(root, ast.Name) and (root.id == "self" or root.id in self.module_names):
                self.add(NO_STATE_ACROSS_CALLS, node, f"mutates {ast.unparse(func.value)} during a call")

    @staticmethod
    def _write_mode(node: ast.Call, os_open: bool = False) -> bool:
        if os_open:
            return True  # os.open flags are ints; any use is suspicious enough
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        if mode is None:
            return False
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            return any(c in mode.value for c in "wax+")
        return True  # a computed mode: cannot tell, treat as a write


def _string_constants(tree: ast.Module) -> tuple[list[str], list[str]]:
    """(C++ sources, other strings), docstrings excluded."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    cpp, other = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            (cpp if _CPP_HINT.search(node.value) else other).append(node.value)
    return cpp, other


def _cpp_findings(sources: list[str], problem_is_half: bool) -> list[tuple[str, str]]:
    found = []
    for src in sources:
        code = strip_cpp_comments(src)
        for rule, pattern in _CPP_RULES.items():
            if rule == NO_PRECISION_DOWNGRADE and problem_is_half:
                continue
            if m := pattern.search(code):
                found.append((rule, f"C++ source uses {m.group(0).strip()!r}"))
    return found


def _flag_findings(strings: list[str]) -> list[tuple[str, str]]:
    found = []
    for s in strings:
        for token in s.split():
            if _BAD_FLAG.match(token):
                found.append((NO_FAST_MATH, f"compiler flag {token}"))
    return found


def static_checks(code: str, problem_source: str = "", backend: str = "cpu") -> list[dict[str, str]]:
    """Run every static rule on the candidate; one check entry per rule (pass, fail or skip)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [
            {"rule": name, "verdict": "skip", "detail": "source does not parse (reported by the build)"}
            for name in STATIC_RULES
        ]
    problem_is_half = bool(_HALF_PROBLEM.search(problem_source))
    scanner = _Scanner(tree, problem_is_half, backend)
    scanner.visit(tree)
    cpp, other = _string_constants(tree)
    found = (
        scanner.found
        + _cpp_findings(cpp, problem_is_half)
        + _flag_findings(other + [strip_cpp_comments(c) for c in cpp])
    )
    if not scanner.has_kernel:
        found.append(
            (
                HAS_COMPILED_KERNEL,
                "no call to load_cpp, load_inline or cpp_extension.load"
                + (" and no @triton.jit kernel" if backend == "gpu" else ""),
            )
        )
    checks = []
    for name in STATIC_RULES:
        details = [d for r, d in found if r == name]
        if name == NO_PRECISION_DOWNGRADE and problem_is_half:
            checks.append({"rule": name, "verdict": "skip", "detail": "the problem uses half precision"})
        elif details:
            checks.append({"rule": name, "verdict": "fail", "detail": "; ".join(dict.fromkeys(details))[:500]})
        else:
            checks.append({"rule": name, "verdict": "pass", "detail": "static"})
    return checks


def first_failure(checks: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in checks if c["verdict"] == "fail"), None)
