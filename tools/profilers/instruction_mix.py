"""Static instruction mix of the built kernel (objdump): vector width used, FMA, scalar vs packed FP."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

FUNC = re.compile(r"^[0-9a-f]+ <(?P<name>.+)>:$")
INSN = re.compile(r"^\s+[0-9a-f]+:\s+(?P<mnemonic>[a-z][a-z0-9.]*)\s*(?P<operands>.*)$")
# Binding and runtime code is not the kernel: skip it so the mix describes the hot code.
SKIP_PREFIXES = (
    "pybind11",
    "torch",
    "c10",
    "at::",
    "std::",
    "_init",
    "_fini",
    "_start",
    "__",
    ".plt",
    ".init",
    ".fini",
    "frame_dummy",
    "register_tm_clones",
    "deregister_tm_clones",
    "void pybind11",
    "PyInit",
)


def collect(so_path: str, timeout_s: float = 60.0) -> dict[str, Any]:
    objdump = shutil.which("objdump")
    if objdump is None:
        return {"status": "unavailable", "reason": "objdump not found (Debian package binutils)"}
    try:
        proc = subprocess.run(
            [objdump, "-d", "-C", "--no-show-raw-insn", so_path], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return {"status": "unavailable", "reason": "objdump timed out"}
    if proc.returncode != 0:
        return {"status": "unavailable", "reason": proc.stderr.strip()[:200]}
    return {"status": "ok", "text": proc.stdout}


# Data movement, logic and shuffles are not FP arithmetic (``vxorps x,x,x`` is just zeroing).
NON_ARITHMETIC = (
    "mov",
    "vmov",
    "xor",
    "vxor",
    "and",
    "vand",
    "or",
    "vor",
    "unpck",
    "vunpck",
    "shuf",
    "vshuf",
    "vperm",
    "blend",
    "vblend",
    "vbroadcast",
    "vinsert",
    "vextract",
    "vgather",
    "vscatter",
    "vpermt",
    "vcompress",
    "vexpand",
)


def _is_kernel_function(name: str) -> bool:
    return not (name.startswith(SKIP_PREFIXES) or "@plt" in name)


def _empty_counts() -> dict[str, int]:
    return {
        "instructions": 0,
        "fma": 0,
        "packed_fp_512": 0,
        "packed_fp_256": 0,
        "packed_fp_128": 0,
        "scalar_fp": 0,
        "vector_int": 0,
        "vector_moves": 0,
    }


def _tally(counts: dict[str, int], mn: str, ops: str) -> None:
    """Count one instruction (mnemonic, AT&T operands) into ``counts``."""
    counts["instructions"] += 1
    if mn.startswith(("vfmadd", "vfmsub", "vfnmadd", "vfnmsub")):
        counts["fma"] += 1
    if mn.startswith(NON_ARITHMETIC):
        counts["vector_moves"] += int(any(r in ops for r in ("xmm", "ymm", "zmm")))
        return
    is_fp_packed = mn.endswith(("ps", "pd")) and not mn.endswith(("ss", "sd"))
    if (
        mn.endswith(("ss", "sd"))
        and ("xmm" in ops)
        and not mn.startswith(("movs", "vmovs"))
        or mn
        in (
            "addss",
            "mulss",
            "addsd",
            "mulsd",
        )
    ):
        counts["scalar_fp"] += 1
    elif is_fp_packed or mn.startswith(("vfmadd", "vfmsub")) and mn.endswith(("ps", "pd")):
        width = 512 if "zmm" in ops else 256 if "ymm" in ops else 128 if "xmm" in ops else 0
        if width:
            counts[f"packed_fp_{width}"] += 1
    elif mn.startswith("vp") or mn.startswith("p") and "xmm" in ops:
        counts["vector_int"] += 1


def _summary(counts: dict[str, int]) -> dict[str, Any]:
    packed = counts["packed_fp_512"] + counts["packed_fp_256"] + counts["packed_fp_128"]
    widest = (
        512 if counts["packed_fp_512"] else 256 if counts["packed_fp_256"] else 128 if counts["packed_fp_128"] else 0
    )
    return {**counts, "packed_fp": packed, "widest_vector_bits": widest}


def parse(text: str) -> dict[str, Any]:
    counts = _empty_counts()
    functions: list[str] = []
    in_kernel = False
    for line in text.splitlines():
        if m := FUNC.match(line):
            in_kernel = _is_kernel_function(m["name"])
            if in_kernel:
                functions.append(m["name"])
            continue
        m = INSN.match(line)
        if in_kernel and m:
            _tally(counts, m["mnemonic"], m["operands"])
    return {**_summary(counts), "functions": functions[:20]}


def loop_mix(body: list[str]) -> dict[str, Any]:
    """The same counts for one loop body (instruction texts ``mnemonic operands``, as
    ``mca.find_loops`` returns them): what the hot loop itself executes, which the whole binary's
    counts (remainder loops, scalar set-up, libm calls) can hide."""
    counts = _empty_counts()
    for text in body:
        mn, _, ops = text.strip().partition(" ")
        if mn and mn[0].isalpha():
            _tally(counts, mn, ops)
    return _summary(counts)


def packed_dominates(mix: dict[str, Any] | None) -> bool:
    """Whether the kernel's hot code is vector code: packed FP outnumbers scalar FP in the hot loop
    (objdump, when one was found), else in the whole kernel. Hand-written intrinsics are vector
    code that gcc's vectorization report never mentions (it reports only its own auto-vectorization)."""
    if not mix:
        return False
    hot = mix.get("hot_loop") or {}
    if hot.get("packed_fp", 0) + hot.get("scalar_fp", 0) > 0:
        return hot["packed_fp"] > hot["scalar_fp"]
    return mix.get("packed_fp", 0) > mix.get("scalar_fp", 0)


def render(mix: dict[str, Any]) -> str:
    return (
        f"instruction mix (static, objdump): {mix['instructions']} instructions in "
        f"{len(mix['functions'])} kernel function(s); packed FP {mix['packed_fp']} "
        f"(512-bit {mix['packed_fp_512']}, 256-bit {mix['packed_fp_256']}, 128-bit {mix['packed_fp_128']}), "
        f"scalar FP {mix['scalar_fp']}, FMA {mix['fma']}; widest vectors {mix['widest_vector_bits']} bits"
        + _render_hot(mix.get("hot_loop"))
    )


def _render_hot(hot: dict[str, Any] | None) -> str:
    if not hot or not hot.get("instructions"):
        return ""
    return (
        f"; hot loop ({hot['instructions']} instructions): packed FP {hot['packed_fp']} "
        f"(widest {hot['widest_vector_bits']} bits), scalar FP {hot['scalar_fp']}"
    )
