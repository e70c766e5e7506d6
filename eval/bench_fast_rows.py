"""Benchmark: each row-wise, channel-wise, reduction, loss, pooling and scan fast form against torch.

Run as ``python -m pragma.eval.bench_fast_rows [--only NAME ...] [--rounds N] [--json PATH]``.

For every case the kernel is exactly what the Coder's prompt hands over: the problem is loaded and
probed as a run loads it (tools/problem.py), the <formulas> block for its kernel signature
(knowledge/formulas.render) is pasted as the body of pragma_kernel, wrapped by tools/glue.py into
the ``ModelNew`` the verifier would import, and built by tools/cext.py with the verifier's flags.
Both sides then run at 1 thread (torch.set_num_threads(1), OMP_NUM_THREADS=1), allocate their
outputs the same way (torch.empty in the glue, torch's own allocation in the reference), and are
timed interleaved (kernel call, reference call, ...); the figure is the ratio of the medians. Each
kernel's output is first compared with the reference computed in float64.

Shapes: the CPU suite's problems where it has the operator (eval/suites/cpu, eval/suites/examples),
else a KernelBench level-1 operator written here at the size eval/suites/overrides gives level 1 on
CPU (batch 8-1024 rows of 4096, 256 x 256 x 255 reductions). The vector width is read from the
built kernel's machine code (objdump: zmm = 512-bit, ymm = 256-bit registers in use).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch and the kernels load libgomp

import torch  # noqa: E402

from pragma.graph.clikit import console, out  # noqa: E402

ROOT = Path(__file__).resolve().parent
SUITE = ROOT / "suites" / "cpu"
EXAMPLES = ROOT / "suites" / "examples"

# KernelBench level-1 operators the suites lack, at the overrides' CPU sizes (batch_size 8,
# dim1 256, dim2 255, rows of 4096; the hinge loss's 1024 x 1024). Written for this bench in
# KernelBench's format.
_HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"
_NO_INIT = "\n\ndef get_init_inputs():\n    return []\n"
EXTRA: dict[str, str] = {
    "kb_sum_dim1": _HEAD + "class Model(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
    "        self.dim = dim\n\n    def forward(self, x):\n        return torch.sum(x, dim=self.dim, keepdim=True)\n\n\n"
    "def get_inputs():\n    return [torch.rand(8, 256, 255)]\n\n\ndef get_init_inputs():\n    return [1]\n",
}


def cases() -> dict[str, Path]:
    """label -> problem file: the suites' operators, then the extra KernelBench ones."""
    found = {
        "softmax": EXAMPLES / "softmax.py",
        "log_softmax": SUITE / "log_softmax.py",
        "layer_norm": SUITE / "layer_norm.py",
        "rms_norm": SUITE / "rms_norm.py",
        "l2_normalize": SUITE / "l2_normalize.py",
        "batch_norm": SUITE / "batch_norm_train.py",
        "group_norm": SUITE / "group_norm.py",
    }
    tmp = Path(tempfile.mkdtemp(prefix="pragma-bench-rows-"))
    for label, text in EXTRA.items():
        (tmp / f"{label}.py").write_text(text)
        found[label] = tmp / f"{label}.py"
    return found


def cpu_kind() -> str:
    """The CPU model and its widest vector instruction set, from /proc/cpuinfo."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    model = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = set((re.search(r"^flags\s*:\s*(.+)$", info, re.M) or re.match("", "")).group(1).split() or [])
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return f"{model.group(1).strip() if model else 'unknown CPU'} ({isa})"


def vector_width(so_path: str) -> str:
    """The widest vector registers pragma_kernel's machine code uses: zmm (512), ymm (256), xmm."""
    try:
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so_path], capture_output=True, text=True).stdout
    except OSError:
        return "unknown (no objdump)"
    # The entry and the functions OpenMP outlines from it (pragma_kernel._omp_fn.0, ...).
    body = "\n".join(re.findall(r"<pragma_kernel[^>]*>:\n(.*?)(?:\n\n|\Z)", text, re.S)) or text
    for reg, bits in (("zmm", 512), ("ymm", 256), ("xmm", 128)):
        if re.search(rf"\b(?:v\w+ps|v\w+pd|vmov\w*)\b[^\n]*%{reg}", body):
            return f"{reg} ({bits}-bit)"
    return "scalar"


def _max_error(got: Any, want: Any) -> float:
    """The largest |got - want| over the outputs, want computed in float64."""
    if isinstance(want, (tuple, list)):
        return max(_max_error(g, w) for g, w in zip(got, want, strict=True))
    if not want.is_floating_point():
        return float((got != want).sum())  # integer outputs: the count of differing values
    return float((got.double() - want).abs().max())


def bench_case(label: str, path: Path, rounds: int) -> dict[str, Any]:
    """Load, paste, build and time one case; returns its row of the table."""
    from pragma.nodes import coder
    from pragma.tools import cext, glue
    from pragma.tools.problem import load_problem

    problem = load_problem(path)
    spec = glue.kernel_spec(problem)
    section = coder._formulas_section(problem, spec)
    block = re.search(r"```cpp\n(.*?)```", section, re.S)
    if not block or "pragma_kernel" in block.group(1):
        return {"case": label, "error": "no whole-body fast form in the prompt"}
    head = re.sub(r"//[^\n]*", "", glue.prototype(spec)).rstrip().removesuffix(";")
    cpp = glue.with_standard_headers(f"{head} {{\n{block.group(1)}}}\n")
    sys.modules["pragma_cext"] = cext
    scope: dict[str, Any] = {}
    exec(compile(glue.module_source(spec, cpp), f"<{label} glue>", "exec"), scope)  # noqa: S102 - our own text
    ref_scope: dict[str, Any] = {"__name__": f"bench_{label}"}
    exec(compile(problem["source"], str(path), "exec"), ref_scope)  # noqa: S102 - the problem file
    init = ref_scope["get_init_inputs"]()
    torch.manual_seed(0)
    reference = ref_scope["Model"](*init)
    torch.manual_seed(0)
    model = scope["ModelNew"](*init)
    so_path = cext.BUILDS[-1]["so_path"]
    torch.manual_seed(1)
    inputs = ref_scope["get_inputs"]()
    with torch.no_grad():
        want = reference.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
        reference.float()
        error = _max_error(model(*inputs), want)
        kernel_s, torch_s = [], []
        for _ in range(3):  # warm-up: page faults of first allocations, caches
            model(*inputs)
            reference(*inputs)
        for _ in range(rounds):
            t0 = time.perf_counter()
            model(*inputs)
            t1 = time.perf_counter()
            reference(*inputs)
            t2 = time.perf_counter()
            kernel_s.append(t1 - t0)
            torch_s.append(t2 - t1)
    kernel_ms, torch_ms = statistics.median(kernel_s) * 1e3, statistics.median(torch_s) * 1e3
    return {
        "case": label,
        "problem": path.name,
        "shapes": " ".join("x".join(map(str, x.shape)) for x in inputs),
        "kernel_ms": round(kernel_ms, 3),
        "torch_ms": round(torch_ms, 3),
        "speedup": round(torch_ms / kernel_ms, 3),
        "vector": vector_width(so_path),
        "max_abs_error": error,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pragma.eval.bench_fast_rows", description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="case labels to run (default: all)")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved timed rounds per case")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    table = cases()
    unknown = sorted(set(args.only) - set(table))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(table)}")
    load = os.getloadavg()[0]
    out.print(f"fast forms against torch at 1 thread, median of {args.rounds} interleaved rounds")
    out.print(f"machine: {cpu_kind()}; torch {torch.__version__}; 1-minute load {load:.2f}")
    rows = []
    out.print(f"{'case':<16} {'shapes':<22} {'kernel ms':>10} {'torch ms':>10} {'speedup':>8}  {'vector':<14} max err")
    for label, path in table.items():
        if args.only and label not in args.only:
            continue
        try:
            row = bench_case(label, path, args.rounds)
        except Exception as exc:  # one broken case must not hide the others' figures
            row = {"case": label, "error": " ".join(str(exc).split())[:200]}
        rows.append(row)
        if "error" in row:
            out.print(f"{label:<16} error: {row['error']}")
            continue
        out.print(
            f"{label:<16} {row['shapes']:<22} {row['kernel_ms']:>10.3f} {row['torch_ms']:>10.3f} "
            f"{row['speedup']:>7.2f}x  {row['vector']:<14} {row['max_abs_error']:.2g}"
        )
    timed = [r["speedup"] for r in rows if "speedup" in r]
    if timed:
        geomean = statistics.geometric_mean(timed)
        slow = [r["case"] for r in rows if r.get("speedup", 1.0) < 1.0]
        out.print(f"geomean {geomean:.2f}x over {len(timed)}; below 1.0x: {', '.join(slow) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu_kind(), "load_1min": load, "rows": rows}, indent=1))
    if any("error" in r for r in rows):
        console.print("some cases failed (see above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
