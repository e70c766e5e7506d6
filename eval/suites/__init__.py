"""Benchmark suites: directories of KernelBench-format problems, each problem with a category.

A suite is any directory (searched recursively) of problem files: PRAGMA's own (``cpu/``,
``examples/``) or a KernelBench checkout (``KernelBench/level1`` ... ``level3``). Files that do not
follow the contract (``Model``, ``get_inputs``, ``get_init_inputs``) are skipped, so a whole
checkout, scripts included, can be given.

Category of a problem, first match wins:
1. ``suite.json`` beside the file or at the suite root: ``{"file.py": "category"}``;
2. a ``category: NAME`` phrase in the module docstring;
3. keywords in the file name (KernelBench names the operator in the file name).

Shape overrides (``--overrides FILE``, JSON or TOML) replace module-level size globals:
``{"defaults": {"batch_size": 16}, "problems": {"level1/1_*": {"N": 512}}}``. ``defaults``
apply to every problem that defines the name; a ``problems`` entry must match at least one
problem and name globals that exist (typos fail loudly). The sandbox loads problems by path, so
an overridden problem is materialized as a copy under the data directory.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import logging
import os
import re
import threading
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pragma.graph.context import data_dir
from pragma.tools.problem import ProblemError, check_source

log = logging.getLogger(__name__)

CATEGORIES = ("matmul", "activation", "normalization", "pooling/reduction", "convolution", "others")
ALIASES = {
    "reduction": "pooling/reduction",
    "pooling": "pooling/reduction",
    "conv": "convolution",
    "norm": "normalization",
    "other": "others",
    "gemm": "matmul",
}
# Checked in this order: a fused KernelBench level-2 problem (Conv2d_ReLU_BiasAdd) is named
# after its heaviest operator first, and convolution/matmul dominate its cost.
KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("convolution", ("conv",)),
    (
        "matmul",
        (
            "matmul",
            "matrix_mult",
            "matrix_multiplication",
            "gemm",
            "bmm",
            "matvec",
            "mv_",
            "linear",
            "mlp",
            "einsum",
            "dot",
        ),
    ),
    ("normalization", ("norm", "softmax")),
    (
        "pooling/reduction",
        ("pool", "reduction", "reduce", "argmax", "argmin", "sum", "mean", "max_", "min_", "prod", "logsumexp"),
    ),
    (
        "activation",
        (
            "relu",
            "gelu",
            "sigmoid",
            "tanh",
            "elu",
            "softplus",
            "softsign",
            "swish",
            "silu",
            "hardtanh",
            "mish",
            "hardsigmoid",
            "activation",
        ),
    ),
)
DOCSTRING_CATEGORY = re.compile(r"category:\s*([A-Za-z/_-]+)")


class SuiteError(ValueError):
    """An unusable suite directory or override file (one-line message; the CLI exits 2)."""


@dataclass(frozen=True)
class SuiteProblem:
    name: str  # path relative to the suite root, without .py ("level1/19_ReLU")
    path: str  # what the sandbox loads: the original file, or its overridden copy
    source_path: str  # the original file
    category: str
    sha256: str  # of the text at ``path``: keys caches and detects an edited suite on resume
    overrides: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize_category(raw: str) -> str:
    value = raw.strip().lower()
    value = ALIASES.get(value, value)
    if value not in CATEGORIES:
        raise SuiteError(f"unknown category {raw!r}; use one of: {', '.join(CATEGORIES)}")
    return value


def same_category(a: str, b: str) -> bool:
    """Whether two category words name the same category ('reduction' and 'pooling/reduction' do);
    'others' and unknown words match nothing: they name no technique to share."""
    norm = [ALIASES.get(w.strip().lower(), w.strip().lower()) for w in (a, b)]
    return norm[0] == norm[1] and norm[0] in CATEGORIES and norm[0] != "others"


def category_from_name(stem: str) -> str:
    lowered = stem.lower()
    for category, words in KEYWORDS:
        if any(w in lowered for w in words):
            return category
    return "others"


def _category(path: Path, root: Path, source: str, index: dict[Path, dict[str, str]]) -> str:
    for folder in (path.parent, root):
        mapping = index.get(folder)
        if mapping is None:
            mapping = _read_index(folder)
            index[folder] = mapping
        rel = str(path.relative_to(folder))
        if rel in mapping:
            return normalize_category(mapping[rel])
    try:
        doc = ast.get_docstring(ast.parse(source)) or ""
    except SyntaxError:
        doc = ""
    if m := DOCSTRING_CATEGORY.search(doc):
        return normalize_category(m.group(1))
    return category_from_name(path.stem)


def _read_index(folder: Path) -> dict[str, str]:
    file = folder / "suite.json"
    if not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text())
    except ValueError as exc:
        raise SuiteError(f"{file}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SuiteError(f'{file}: expected an object {{"file.py": "category"}}')
    return {str(k): str(v) for k, v in data.items()}


def read_overrides(path: str | Path | None) -> dict[str, Any]:
    if not path:
        return {"defaults": {}, "problems": {}}
    p = Path(path).expanduser()
    if not p.is_file():
        raise SuiteError(f"override file not found: {p}")
    try:
        data = tomllib.loads(p.read_text()) if p.suffix == ".toml" else json.loads(p.read_text())
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise SuiteError(f"{p}: cannot parse overrides: {exc}") from None
    unknown = set(data) - {"defaults", "problems"}
    if unknown or not all(isinstance(data.get(k, {}), dict) for k in ("defaults", "problems")):
        raise SuiteError(f'{p}: expected {{"defaults": {{NAME: value}}, "problems": {{GLOB: {{NAME: value}}}}}}')
    return {"defaults": data.get("defaults", {}), "problems": data.get("problems", {})}


def module_globals(source: str) -> dict[str, ast.AST]:
    """Module-level simple assignments ``NAME = value`` (the size globals KernelBench uses)."""
    found: dict[str, ast.AST] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def apply_overrides(source: str, values: dict[str, Any]) -> str:
    """``source`` with the value expressions of the named module globals replaced."""
    targets = module_globals(source)
    lines = source.encode().splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    data = source.encode()
    edits = []
    for name, value in values.items():
        node = targets[name]
        # ast offsets are UTF-8 byte columns: splice bytes, not characters.
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        edits.append((begin, end, repr(value).encode()))
    for begin, end, text in sorted(edits, reverse=True):
        data = data[:begin] + text + data[end:]
    note = ", ".join(f"{k}={v!r}" for k, v in values.items())
    return f"# pragma eval: shape overrides applied ({note})\n" + data.decode()


def _overrides_for(name: str, names_defined: set[str], spec: dict[str, Any], used: set[str]) -> dict[str, Any]:
    values = {k: v for k, v in spec["defaults"].items() if k in names_defined}
    for pattern, entry in spec["problems"].items():
        if fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(name + ".py", pattern):
            used.add(pattern)
            missing = sorted(set(entry) - names_defined)
            if missing:
                raise SuiteError(f"overrides for {pattern!r}: {name} has no module-level {', '.join(missing)}")
            values.update(entry)
    return values


def _materialize(name: str, text: str) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()
    path = data_dir() / "eval" / "problems" / digest[:16] / f"{Path(name).name}.py"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # A name of this process's own: two runs loading one suite at once would otherwise race on
        # one temporary file (the loser's rename found it gone). Same content either way.
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def load_suite(
    root: str | Path, overrides: str | Path | None = None, patterns: list[str] | None = None
) -> list[SuiteProblem]:
    """Every problem under ``root`` (sorted by name), optionally filtered by name globs."""
    base = Path(root).expanduser().resolve()
    if not base.is_dir():
        raise SuiteError(f"suite directory not found: {base}")
    spec = read_overrides(overrides)
    index: dict[Path, dict[str, str]] = {}
    used: set[str] = set()
    problems, skipped = [], 0
    for path in sorted(base.rglob("*.py")):
        if path.name.startswith("_") or any(part.startswith(".") for part in path.relative_to(base).parts):
            continue
        name = str(path.relative_to(base).with_suffix(""))
        if patterns and not any(fnmatch.fnmatch(name, p) for p in patterns):
            continue
        try:
            source = path.read_text()
            check_source(source, str(path))
        except (ProblemError, OSError, UnicodeDecodeError) as exc:
            skipped += 1
            log.debug("not a problem: %s (%s)", path, exc)
            continue
        values = _overrides_for(name, set(module_globals(source)), spec, used)
        text = apply_overrides(source, values) if values else source
        load_path = _materialize(name, text) if values else path
        problems.append(
            SuiteProblem(
                name=name,
                path=str(load_path),
                source_path=str(path),
                category=_category(path, base, source, index),
                sha256=hashlib.sha256(text.encode()).hexdigest(),
                overrides=values,
            )
        )
    unused = sorted(set(spec["problems"]) - used)
    if unused:
        raise SuiteError(f"override patterns match no problem: {', '.join(unused)}")
    if not problems:
        what = f" matching {', '.join(patterns)}" if patterns else ""
        raise SuiteError(f"no KernelBench-format problems{what} under {base} ({skipped} other .py files skipped)")
    if skipped:
        log.info("%s: %d .py files are not problems and were skipped", base, skipped)
    return problems
