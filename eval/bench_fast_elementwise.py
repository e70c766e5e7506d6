"""Benchmark: each element-wise fast form against torch at 1 thread, with the vector width its build used.

Run as ``python -m pragma.eval.bench_fast_elementwise [--only NAME ...] [--rounds N] [--elements N]
[--compare-width BITS] [--json PATH]``.

Per operator of knowledge/fast_forms.py FAST, three kernels are built with the verifier's builder
(tools/cext.build_cpp, its flags), each the loop the kernel prompt's example writes
(``#pragma omp parallel for simd``, ``out0[i] = <op>_fn(x[i])``):

- fast: the fast form exactly as the prompt hands it over (fast_forms.source);
- scalar: the correct-first form the prompt carried before (formulas.cpp_function);
- libm: the scalar form after the playbook's SIMD-libm step (nodes/playbook.libm_step: glibc's
  vector math declared ``omp declare simd``), where the form calls a libm function it covers.

Both sides run at 1 thread (torch.set_num_threads(1), OMP_NUM_THREADS=1) on the same float32
input (randn * 3; |randn| + 1e-3 for rsqrt), allocate their output the same way (torch.empty_like
for the kernel, torch's own allocation for torch), and are timed interleaved; each figure is a
median. 8,000,000 elements (32.0 MB) by default: at 2^23 elements (32 MiB) every output is above
glibc's largest mmap threshold, so both sides would pay ~8k page faults per call and the ratio
would say more about the allocator than about the kernels (the CPU suite sizes its problems
under 32 MiB for the same reason). Each kernel's output is compared with torch's first.

The vector width is read from the fast build's machine code (objdump: zmm = 512, ymm = 256, xmm
packed = 128 bits); ``--compare-width 256`` also times a build with ``-mprefer-vector-width=256``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch and the kernels load an OpenMP runtime

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pragma.graph.clikit import console, out  # noqa: E402
from pragma.knowledge import fast_forms, formulas  # noqa: E402
from pragma.nodes import playbook  # noqa: E402
from pragma.tools.inside import cext  # noqa: E402

DEFAULT_ELEMENTS = 8_000_000
DEFAULT_ROUNDS = 15
# The bench's own check, looser than tests/test_fast_forms.py's (1e-5) and inside the verifier's 1e-4.
CHECK_TOL = 1e-4

TORCH: dict[str, Any] = {
    "relu": torch.relu,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "elu": F.elu,
    "selu": F.selu,
    "celu": F.celu,
    "gelu": F.gelu,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "softsign": F.softsign,
    "tanh": torch.tanh,
    "hardtanh": F.hardtanh,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "logsigmoid": F.logsigmoid,
    "tanhshrink": F.tanhshrink,
    "softshrink": F.softshrink,
    "hardshrink": F.hardshrink,
    "rsqrt": torch.rsqrt,
    "erf": torch.erf,
}


def loop(name: str, prefix: str = "f") -> str:
    """The element-wise loop of the kernel prompt's example around ``<name>_fn``."""
    return (
        f'extern "C" void {prefix}_{name}(const float* x, float* out0, int64_t n) {{\n'
        "    #pragma omp parallel for simd\n"
        f"    for (int64_t i = 0; i < n; ++i) out0[i] = {formulas.cpp_name(name)}(x[i]);\n}}\n"
    )


def fast_source(names: list[str]) -> str:
    """The fast forms as the prompt shows them, with one loop each (``f_<name>``)."""
    return fast_forms.source_of(names) + "\n" + "".join(loop(n) for n in names)


def scalar_source(name: str) -> str:
    return (
        "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n" + formulas.cpp_function(name) + "\n" + loop(name)
    )


def libm_source(name: str) -> str:
    """The scalar kernel after the playbook's libm step (the file it tells the Coder to reply with), or ''."""
    step = playbook.libm_step(scalar_source(name))
    block = re.search(r"```cpp\n(.*?)```", step, re.DOTALL)
    return block.group(1) if block else ""


_FUNC = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")


def vector_width(so_path: str, function: str) -> dict[str, Any]:
    """{bits, fma, objdump}: the widest vector register ``function`` (and its OpenMP-outlined body,
    ``function._omp_fn.N``) uses, 0 for scalar code, and whether it uses packed FMA."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return {"bits": None, "fma": None, "objdump": "objdump not found (Debian package binutils)"}
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", so_path], capture_output=True, text=True).stdout
    functions: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if m := _FUNC.match(line):
            current = m.group("name")
            functions[current] = []
        elif current:
            functions[current].append(line)
    # g++ folds identical functions (celu at alpha 1 is elu): follow a body that only jumps to another.
    for _ in range(3):
        own = functions.get(function, [])
        jump = re.search(r"\bjmp\s+[0-9a-f]+ <(\w+)>", "\n".join(own))
        if len(own) <= 3 and jump and jump.group(1) in functions:
            function = jump.group(1)
    body = "\n".join(
        line
        for name, lines in functions.items()
        if name == function or name.startswith(function + "._omp_fn.")
        for line in lines
    )
    packed = re.findall(r"\bv\w+ps\b[^\n]*%([xyz])mm", body)
    bits = 512 if "z" in packed else 256 if "y" in packed else 128 if "x" in packed else 0
    fma = bool(re.search(r"\bvf(?:n?m(?:add|sub)|maddsub|msubadd)\d{3}ps\b", body))
    return {"bits": bits, "fma": fma, "objdump": "ok"}


def machine() -> dict[str, Any]:
    from pragma.tools import hardware

    spec = hardware.cpu_spec()
    native = subprocess.run([cext.COMPILER, "-march=native", "-Q", "--help=target"], capture_output=True, text=True)
    march = next((ln.split()[-1] for ln in native.stdout.splitlines() if ln.split()[:1] == ["-march="]), "?")
    return {
        "cpu": spec["model"],
        "simd": spec["simd"],
        "march_native": march,
        "compiler": subprocess.run([cext.COMPILER, "--version"], capture_output=True, text=True).stdout.split("\n")[0],
        "torch": torch.__version__,
        "load_1min": os.getloadavg()[0],
        "host": platform.node(),
    }


def _kernel(lib: ctypes.CDLL, symbol: str, x: torch.Tensor):
    fn = getattr(lib, symbol)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None

    def run() -> torch.Tensor:
        y = torch.empty_like(x)
        fn(x.data_ptr(), y.data_ptr(), x.numel())
        return y

    return run


def bench(names: list[str], elements: int, rounds: int, compare_width: int = 0) -> list[dict[str, Any]]:
    torch.set_num_threads(1)
    lib = ctypes.CDLL(cext.build_cpp(fast_source(names), name="bench_fast_elementwise"))
    so_fast = cext.BUILDS[-1]["so_path"]
    narrow = None
    if compare_width:
        narrow = ctypes.CDLL(
            cext.build_cpp(fast_source(names), (f"-mprefer-vector-width={compare_width}",), name="bench_fast_narrow")
        )
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(elements, generator=gen) * 3
    rows = []
    for name in names:
        x = base.abs() + 1e-3 if name == "rsqrt" else base
        reference = TORCH[name]
        calls = {"torch": lambda x=x, reference=reference: reference(x), "fast": _kernel(lib, f"f_{name}", x)}
        calls["scalar"] = _kernel(
            ctypes.CDLL(cext.build_cpp(scalar_source(name), name=f"bench_scalar_{name}")), f"f_{name}", x
        )
        if libm := libm_source(name):
            calls["libm"] = _kernel(ctypes.CDLL(cext.build_cpp(libm, name=f"bench_libm_{name}")), f"f_{name}", x)
        if narrow is not None:
            calls[f"fast{compare_width}"] = _kernel(narrow, f"f_{name}", x)
        expected = reference(x)
        worst = {
            label: float((call() - expected).abs().max())
            for label, call in calls.items()
            if label != "torch" and not torch.allclose(call(), expected, atol=CHECK_TOL, rtol=CHECK_TOL, equal_nan=True)
        }
        times: dict[str, list[float]] = {label: [] for label in calls}
        for call in calls.values():  # warm: first-touch pages, lazy symbol binding
            call()
        for _ in range(rounds):
            for label, call in calls.items():
                t0 = time.perf_counter()
                call()
                times[label].append(time.perf_counter() - t0)
        ms = {label: statistics.median(ts) * 1e3 for label, ts in times.items()}
        rows.append(
            {
                "name": name,
                "ms": ms,
                "speedup": ms["torch"] / ms["fast"],
                **vector_width(so_fast, f"f_{name}"),
                "mismatch": worst,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="operators to run (default: every fast form)")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="timed calls per side")
    parser.add_argument("--elements", type=int, default=DEFAULT_ELEMENTS, help="float32 elements per call")
    parser.add_argument(
        "--compare-width", type=int, default=0, choices=(0, 128, 256, 512), help="also time -mprefer-vector-width=BITS"
    )
    parser.add_argument("--json", default="", help="write the rows and the machine to this file")
    args = parser.parse_args(argv)
    names = args.only or list(fast_forms.FAST)
    unknown = [n for n in names if n not in fast_forms.FAST]
    if unknown:
        console.print(f"no fast form for: {', '.join(unknown)} (known: {', '.join(fast_forms.FAST)})")
        return 2
    info = machine()
    out.print(
        f"machine: {info['cpu']} ({info['simd']}; g++ -march=native = {info['march_native']}), {info['compiler']}, "
        f"torch {info['torch']}, 1 thread, {args.elements} float32 elements, median of {args.rounds} interleaved calls, "
        f"load {info['load_1min']:.2f}"
    )
    rows = bench(names, args.elements, args.rounds, args.compare_width)
    extra = [f"fast{args.compare_width}"] if args.compare_width else []
    out.print(
        f"{'operator':<12} {'torch ms':>9} {'fast ms':>8} {'speedup':>8} {'scalar ms':>10} {'libm ms':>8}"
        + "".join(f" {e + ' ms':>11}" for e in extra)
        + "  width  fma"
    )
    for r in rows:
        ms = r["ms"]
        libm = f"{ms['libm']:8.2f}" if "libm" in ms else f"{'-':>8}"
        width = f"{r['bits']}-bit" if r["bits"] else ("scalar" if r["bits"] == 0 else "?")
        out.print(
            f"{r['name']:<12} {ms['torch']:9.2f} {ms['fast']:8.2f} {r['speedup']:7.2f}x {ms['scalar']:10.2f} {libm}"
            + "".join(f" {ms[e]:11.2f}" for e in extra)
            + f"  {width:>7} {'yes' if r['fma'] else 'no' if r['fma'] is False else '?'}"
            + (f"  MISMATCH {r['mismatch']}" if r["mismatch"] else "")
        )
    slower = [r["name"] for r in rows if r["speedup"] < 1.0]
    out.print(f"below 1.0x torch: {', '.join(slower) if slower else 'none'}; load after: {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "elements": args.elements, "rounds": args.rounds, "rows": rows}, f, indent=1)
    return 1 if any(r["mismatch"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
