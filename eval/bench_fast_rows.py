"""Benchmark: each row-wise, channel-wise, reduction, loss, pooling and scan fast form against torch.

Run as ``python -m pragma.eval.bench_fast_rows [--only NAME ...] [--rounds N] [--json PATH]``.

For every case the kernel is exactly what the Coder's prompt hands over: the problem is loaded and
probed as a run loads it (tools/problem.py), the <formulas> block for its kernel signature
(knowledge/formulas.render) is pasted as the body of pragma_kernel, wrapped by tools/glue.py into
the ``ModelNew`` the verifier would import, and built by tools/inside/cext.py with the verifier's flags.
Both sides then run at 1 thread (torch.set_num_threads(1), OMP_NUM_THREADS=1), allocate their
outputs the same way (torch.empty in the glue, torch's own allocation in the reference), and are
timed interleaved (kernel call, reference call, ...); the figure is the ratio of the medians. Each
kernel's output is first compared with the reference computed in float64.

Shapes: the CPU suite's problems where it has the operator (eval/suites/cpu, eval/suites/examples),
else a KernelBench level-1 operator written here at the size eval/suites/overrides gives level 1 on
CPU (8 rows of 4096, 8 x 256 x 255 reductions, 1024 x 1024 for the hinge loss). The vector width is read from the
built kernel's machine code (objdump: zmm = 512-bit, ymm = 256-bit registers in use).
"""

from __future__ import annotations

import argparse
import functools
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

# KernelBench level-1 operators the suites lack, at the sizes eval/suites/overrides gives level 1 on
# CPU (batch_size 8, dim1 256, dim2 255, input_shape (4096,), features 32, sequence_length 512,
# height and width 32, num_classes 64; the hinge loss's 1024 x 1024), in KernelBench's format.
# label -> (constructor parameters, constructor values, forward's parameters, its return, inputs)
_KB: dict[str, tuple[str, str, str, str, str]] = {
    "kb_sum_dim1": ("dim", "1", "x", "torch.sum(x, dim=self.dim, keepdim=True)", "torch.rand(8, 256, 255)"),
    "kb_mean_dim1": ("dim", "1", "x", "torch.mean(x, dim=self.dim)", "torch.rand(8, 256, 255)"),
    "kb_min_dim1": ("dim", "1", "x", "torch.min(x, dim=self.dim)[0]", "torch.rand(8, 256, 255)"),
    "kb_argmax_dim1": ("dim", "1", "x", "torch.argmax(x, dim=self.dim)", "torch.rand(8, 256, 255)"),
    "kb_instance_norm": (
        "num_features",
        "32",
        "x",
        "self.inorm(x)",
        "torch.rand(8, 32, 32, 32)",
    ),
    "kb_mse": (
        "",
        "",
        "predictions, targets",
        "torch.mean((predictions - targets) ** 2)",
        "torch.rand(8, 4096) * 0.7, torch.rand(8, 4096)",
    ),
    "kb_huber": (
        "",
        "",
        "predictions, targets",
        "F.smooth_l1_loss(predictions, targets)",
        "torch.rand(8, 4096) * 0.7, torch.rand(8, 4096)",
    ),
    "kb_kl_div": (
        "",
        "",
        "predictions, targets",
        "F.kl_div(torch.log(predictions), targets, reduction='batchmean')",
        "torch.rand(8, 4096).softmax(dim=-1), torch.rand(8, 4096).softmax(dim=-1)",
    ),
    "kb_cross_entropy": (
        "",
        "",
        "predictions, targets",
        "F.cross_entropy(predictions, targets)",
        "torch.rand(8, 64), torch.randint(0, 64, (8,))",
    ),
    "kb_hinge": (
        "",
        "",
        "predictions, targets",
        "torch.mean(torch.clamp(1 - predictions * targets, min=0))",
        "torch.rand(1024, 1024), torch.randint(0, 2, (1024,)).float() * 2 - 1",
    ),
    "kb_cosine_loss": (
        "",
        "",
        "predictions, targets",
        "torch.mean(1 - F.cosine_similarity(predictions, targets, dim=1))",
        "torch.rand(8, 4096), torch.rand(8, 4096)",
    ),
    "kb_max_pool1d": (
        "kernel_size, stride, padding, dilation",
        "8, 1, 4, 3",
        "x",
        "self.pool(x)",
        "torch.rand(8, 32, 512)",
    ),
    "kb_avg_pool2d": ("kernel_size", "11", "x", "self.pool(x)", "torch.rand(8, 16, 32, 32)"),
    "kb_cumprod": ("dim", "1", "x", "torch.cumprod(x, dim=self.dim)", "torch.rand(8, 4096)"),
}
# The modules a few of them build in their constructor.
_MODULES = {
    "kb_instance_norm": "self.inorm = nn.InstanceNorm2d(num_features=num_features)",
    "kb_max_pool1d": "self.pool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)",
    "kb_avg_pool2d": "self.pool = nn.AvgPool2d(kernel_size=kernel_size)",
}


def _kernelbench_source(label: str) -> str:
    params, values, args, ret, inputs = _KB[label]
    init = [f"        self.{p.strip()} = {p.strip()}" for p in params.split(",") if p.strip()]
    if label in _MODULES:
        init = [f"        {_MODULES[label]}"]
    return (
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\n"
        "class Model(nn.Module):\n"
        f"    def __init__(self{', ' + params if params else ''}):\n        super().__init__()\n"
        + "".join(line + "\n" for line in init)
        + f"\n    def forward(self, {args}):\n        return {ret}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return [{values}]\n"
    )


@functools.cache
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
        "sum_dim": EXAMPLES / "sum_reduction.py",
        "max_dim": SUITE / "max_reduction.py",
        "argmin_dim": SUITE / "argmin.py",
        "mean_hw": SUITE / "global_avg_pool.py",
        "logsumexp": SUITE / "logsumexp.py",
        "cross_entropy": SUITE / "cross_entropy_rows.py",
        "smooth_l1": SUITE / "huber_elementwise.py",
        "cosine_sim": SUITE / "cosine_similarity_rows.py",
        "max_pool2d": SUITE / "max_pool2d.py",
        "avg_pool1d": SUITE / "avg_pool1d.py",
        "cumsum": SUITE / "cumsum.py",
        "reverse_cumsum": SUITE / "reverse_cumsum.py",
    }
    tmp = Path(tempfile.mkdtemp(prefix="pragma-bench-rows-"))
    for label in _KB:
        (tmp / f"{label}.py").write_text(_kernelbench_source(label))
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
    from pragma.tools import glue
    from pragma.tools.inside import cext
    from pragma.tools.problem import load_problem

    problem = load_problem(path)
    spec = glue.kernel_spec(problem)
    section = coder._formulas_section(problem, spec)
    block = re.search(r"```cpp\n(.*?)```", section, re.S)
    if not block or "pragma_kernel" in block.group(1):
        return {"case": label, "error": "no whole-body fast form in the prompt"}
    head = re.sub(r"//[^\n]*", "", glue.prototype(spec)).rstrip()
    cpp = glue.with_fast_forms(glue.with_standard_headers(f"{head} {{\n{block.group(1)}}}\n"))
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
