"""Static throughput analysis of the kernel's hot loop with llvm-mca (Debian package ``llvm``).

Why: most machines here have no hardware counters, and valgrind cannot execute AVX-512, so for
the intrinsics kernels strong models write, callgrind has nothing to say. llvm-mca runs on any
x86 binary: it schedules a loop body on the CPU's model (``-mcpu=native``) and reports the
steady-state cycles per iteration, IPC, the pressure on each execution resource and the
bottleneck (resource pressure or data dependencies).

collect: find the hot loop in ``objdump -d`` of the built kernel: in the hottest kernel function
(perf record's hot spots name it; else every kernel function), the innermost loops (a backward
jump whose span holds no other backward jump), the one with the widest vector registers, then the
largest (a vectorized main body is wider than its remainder loops); rewrite it as assembly llvm-mca accepts (jump targets to
a label, objdump's comments dropped) and run ``llvm-mca -mcpu=native -bottleneck-analysis``.
parse: the summary, the resource pressure row and the bottleneck lines. The figures are static:
every load is assumed to hit L1 and no branch to mispredict, so cycles per iteration is a floor.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from pragma.tools.profilers.instruction_mix import FUNC, _is_kernel_function
from pragma.tools.profilers.metrics import metric

SOURCE = "llvm-mca (static, hot loop)"
ITERATIONS = 100
ADDR_INSN = re.compile(r"^\s+(?P<addr>[0-9a-f]+):\s+(?P<text>\S.*)$")
JUMP_TARGET = re.compile(r"^(?P<mnemonic>j[a-z]+)\s+(?P<target>[0-9a-f]+)\s+<[^>]*>")
SKIP = ("nop", "cs nop", "data16", "xchg   %ax,%ax", "endbr64")


def mca_binary() -> str | None:
    """llvm-mca, or a versioned one (Debian installs llvm-mca-N next to the unversioned link)."""
    for name in ("llvm-mca", *(f"llvm-mca-{v}" for v in range(20, 13, -1))):
        if path := shutil.which(name):
            return path
    return None


def find_loops(objdump_text: str) -> list[dict[str, Any]]:
    """Every loop of the kernel functions: {function, start, end, body (instruction texts), innermost}."""
    functions: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] | None = None
    for line in objdump_text.splitlines():
        if m := FUNC.match(line):
            current = functions.setdefault(m["name"], []) if _is_kernel_function(m["name"]) else None
        elif current is not None and (m := ADDR_INSN.match(line)):
            text = m["text"].split("#", 1)[0].rstrip()
            if text and not text.startswith("(bad)"):
                current.append((int(m["addr"], 16), text))
    loops = []
    for name, insns in functions.items():
        for addr, text in insns:
            j = JUMP_TARGET.match(text)
            if j and int(j["target"], 16) < addr and int(j["target"], 16) >= insns[0][0]:
                start = int(j["target"], 16)
                body = [t for a, t in insns if start <= a <= addr]
                loops.append({"function": name, "start": start, "end": addr, "body": body})
    for loop in loops:
        loop["innermost"] = not any(
            o is not loop and loop["start"] <= o["start"] and o["end"] < loop["end"] for o in loops
        )
    return loops


def _vector_bits(body: list[str]) -> int:
    text = " ".join(body)
    return 512 if "%zmm" in text else 256 if "%ymm" in text else 128 if "%xmm" in text else 0


def _rank(loop: dict[str, Any]) -> tuple[int, int]:
    # The main body of a vectorized loop uses the widest registers; its scalar or narrower
    # remainder and peeling loops do not. Among equals, the larger body (more unrolled) wins.
    return _vector_bits(loop["body"]), len(loop["body"])


def function_key(name: str) -> str:
    """A function's name without its return type, argument list or spaces, so that perf's and
    objdump's spellings of one function meet: objdump -C writes ``void pool_sp<4, 1>(float const*,
    float*, long)``, perf ``pool_sp<4, 1>`` (the ablation's max pooling: the old prefix match picked
    the loop of ``pool_sp<8, 4>``, an instantiation the problem never ran)."""
    depth, cut, start = 0, len(name), 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0 and ch == "(" and i > 0:
            cut = i
            break
        elif depth == 0 and ch == " ":
            start = i + 1  # what came before a top-level space was the return type
    return name[start:cut].replace(" ", "")


def same_function(objdump_name: str, perf_name: str) -> bool:
    """One function under objdump's and perf's spellings: the one match pick_hot_loop and analyse's
    picked_by both use (they once differed, and a loop perf found was reported as not perf's)."""
    return function_key(objdump_name) == function_key(perf_name)


def pick_hot_loop(loops: list[dict[str, Any]], hot_symbols: list[str]) -> dict[str, Any] | None:
    """The innermost loop with the widest vectors (then the most instructions), in the hottest
    kernel function that has one. Spans that call, return or save registers are not loop bodies
    (a jump back into shared tail code also makes a backward jump)."""
    inner = [
        lp
        for lp in loops
        if lp["innermost"] and not any(t.startswith(("call", "ret", "push", "pop", "leave")) for t in lp["body"])
    ]
    for sym in hot_symbols:
        mine = [lp for lp in inner if same_function(lp["function"], sym)]
        if mine:
            return max(mine, key=_rank)
    return max(inner, key=_rank) if inner else None


def to_asm(loop: dict[str, Any]) -> str:
    """The loop as AT&T assembly llvm-mca parses: every jump goes to one label (mca does not follow
    branches; it only needs the operand to assemble), padding nops dropped."""
    lines = [".Lloop:"]
    for text in loop["body"]:
        if text.startswith(SKIP):
            continue
        if j := JUMP_TARGET.match(text):
            text = f"{j['mnemonic']} .Lloop"
        lines.append("  " + re.sub(r"\s+", " ", text, count=1))
    return "\n".join(lines) + "\n"


# LLVM releases before 16 have no Zen4 model: on a Zen4 host ``-mcpu=native`` schedules with the
# Zen3 model, which has no AVX-512 instructions and rejects the loop. Intel's AVX-512 model is
# then the nearest available (Zen4 splits 512-bit operations in two: a floor, not a forecast).
AVX512_FALLBACK_MCPU = "skylake-avx512"


def collect(asm: str, timeout_s: float = 30.0) -> dict[str, Any]:
    binary = mca_binary()
    if binary is None:
        return {"status": "unavailable", "reason": "llvm-mca not installed (Debian package llvm)"}
    tries = ["native"] + ([AVX512_FALLBACK_MCPU] if "%zmm" in asm else [])
    reason = ""
    for mcpu in tries:
        try:
            proc = subprocess.run(
                [binary, f"-mcpu={mcpu}", f"-iterations={ITERATIONS}", "-bottleneck-analysis", "-"],
                input=asm,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return {"status": "unavailable", "reason": f"llvm-mca exceeded {timeout_s:.0f} s"}
        if proc.returncode == 0:
            note = "" if mcpu == "native" else f"-mcpu=native failed ({reason}); scheduled with {mcpu}'s model"
            return {"status": "ok", "text": proc.stdout, "mcpu": mcpu, "note": note}
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        reason = "; ".join(lines[:2])[:200] or f"exit code {proc.returncode}"
    return {"status": "unavailable", "reason": f"llvm-mca failed: {reason}"}


def _num(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text, re.M)
    return float(m[1]) if m else None


def parse(text: str) -> dict[str, Any]:
    """Summary figures, per-resource pressure per iteration, and the bottleneck llvm-mca names."""
    iterations = _num(r"^Iterations:\s+(\d+)", text) or ITERATIONS
    total = _num(r"^Total Cycles:\s+(\d+)", text) or 0.0
    out: dict[str, Any] = {
        "instructions_per_iteration": (_num(r"^Instructions:\s+(\d+)", text) or 0.0) / iterations,
        "cycles_per_iteration": total / iterations,
        "ipc": _num(r"^IPC:\s+([\d.]+)", text) or 0.0,
        "block_rthroughput": _num(r"^Block RThroughput:\s+([\d.]+)", text) or 0.0,
        "dispatch_width": _num(r"^Dispatch Width:\s+(\d+)", text) or 0.0,
    }
    names = dict(re.findall(r"^\[([\d.]+)\]\s+-\s+(\S+)", text, re.M))
    pressure: dict[str, float] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Resource pressure per iteration:") and i + 2 < len(lines):
            keys = re.findall(r"\[([\d.]+)\]", lines[i + 1])
            values = lines[i + 2].split()
            for key, value in zip(keys, values, strict=False):  # a wrapped row may be short
                if value != "-":
                    label = names.get(key, key)
                    pressure[label] = max(pressure.get(label, 0.0), float(value))
            break
    out["pressure"] = pressure
    if pressure and out["cycles_per_iteration"] > 0:
        busiest = max(pressure, key=pressure.get)
        out["busiest_resource"] = busiest
        out["port_pressure_pct"] = min(100.0, 100.0 * pressure[busiest] / out["cycles_per_iteration"])
    res = _num(r"Resource Pressure\s+\[\s*([\d.]+)%\s*\]", text)
    dep = _num(r"Data Dependencies:\s+\[\s*([\d.]+)%\s*\]", text)
    if "No resource or data dependency bottlenecks discovered" in text:
        out["bottleneck"] = "none: the loop issues at its throughput limit (no resource or dependency stalls)"
    elif res is not None or dep is not None:
        kind = "data dependencies" if (dep or 0) > (res or 0) else "resource pressure"
        out["bottleneck"] = f"{kind} (resource pressure {res or 0:.0f}%, data dependencies {dep or 0:.0f}% of cycles)"
    return out


def analyse(objdump_text: str, hot_symbols: list[str]) -> dict[str, Any]:
    """collect + parse for one built kernel: the profile's ``mca`` section, or unavailable with why."""
    loops = find_loops(objdump_text)
    loop = pick_hot_loop(loops, hot_symbols)
    if loop is None:
        return {"status": "unavailable", "reason": "no loop (backward jump) in the kernel's functions"}
    run = collect(to_asm(loop))
    if run["status"] != "ok":
        return run
    parsed = parse(run["text"])
    parsed.update(mcpu=run["mcpu"], **({"note": run["note"]} if run["note"] else {}))
    how = (
        "widest innermost loop of the hottest kernel function (perf record)"
        if any(same_function(loop["function"], s) for s in hot_symbols)
        else "widest innermost loop of the kernel"
    )
    return {
        "status": "ok",
        "function": loop["function"],
        "loop_start": hex(loop["start"]),
        "loop_instructions": len(loop["body"]),
        "picked_by": how,
        **parsed,
    }


def to_metrics(mca: dict[str, Any]) -> dict[str, dict]:
    if mca.get("status") != "ok" or mca.get("cycles_per_iteration", 0) <= 0:
        return {}
    out = {
        "mca_cycles_per_iteration": metric("mca_cycles_per_iteration", mca["cycles_per_iteration"], SOURCE),
        "mca_ipc": metric("mca_ipc", mca["ipc"], SOURCE),
    }
    if "port_pressure_pct" in mca:
        out["mca_port_pressure_pct"] = metric("mca_port_pressure_pct", mca["port_pressure_pct"], SOURCE)
    return out


def render(mca: dict[str, Any]) -> str:
    if mca.get("status") != "ok":
        return f"llvm-mca unavailable: {mca.get('reason', '')}"
    text = (
        f"hot loop ({mca['function']} at {mca['loop_start']}, {mca['loop_instructions']} instructions, "
        f"{mca['picked_by']}), llvm-mca -mcpu={mca.get('mcpu', 'native')}: {mca['cycles_per_iteration']:.3g} cycles/iteration, "
        f"IPC {mca['ipc']:.3g} of dispatch width {mca['dispatch_width']:.0f}"
    )
    if "busiest_resource" in mca:
        text += f", busiest resource {mca['busiest_resource']} {mca['port_pressure_pct']:.0f}% of cycles"
    if "bottleneck" in mca:
        text += f"; bottleneck: {mca['bottleneck']}"
    text += " (static: assumes L1 hits and no mispredictions)"
    return text + (f"; {mca['note']}" if mca.get("note") else "")
