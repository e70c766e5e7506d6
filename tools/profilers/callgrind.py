"""Cache and branch simulation of the kernel alone with valgrind's callgrind (when counters are missing).

collect: ``command_prefix`` runs the sandboxed worker under callgrind with
- instrumentation off until the region starts (``--instr-atstart=no``; the region switches it on
  through client requests in a small helper library, see tools/inside/region.py), so the ~50x slowdown
  applies to the kernel calls only, not to importing torch;
- collection only inside the kernel's entry call (``--toggle-collect`` on libffi's ``ffi_call``,
  which every ctypes call into a ``pragma_cext`` kernel goes through, and on pybind11's dispatcher
  for ``load_inline`` kernels), so Python, allocation and argument boxing are not counted;
- the machine's cache geometry from sysfs passed explicitly (valgrind's own detection picks a
  wrong last-level cache in VMs), rounded to a power-of-two set count as the simulator requires.
parse: the ``totals:`` line of the output file plus self costs per function; ``to_metrics``
divides by the number of kernel calls.

Valgrind serialises threads, so the simulation runs the kernel with one thread.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pragma.tools.profilers.metrics import metric

SOURCE = "callgrind simulation (kernel calls only)"
# Entry point of a compiled kernel call, by build kind: ctypes -> libffi, load_inline -> pybind11.
ENTRY_TOGGLES = {"cext": "ffi_call", "load_inline": "pybind11::cpp_function::dispatcher*"}
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim")

HELPER_SOURCE = r"""
#include <valgrind/callgrind.h>
// Client requests are no-ops outside valgrind; the region calls these around the kernel calls.
extern "C" void pragma_cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
extern "C" void pragma_cg_zero(void) { CALLGRIND_ZERO_STATS; }
extern "C" void pragma_cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
extern "C" void pragma_cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


# Lines of valgrind's own output that say why a run died, most specific first. The last line of
# the output is usually part of callgrind's summary ("==2== Mispred rate: 0.0%"), not the reason.
FAILURE_PATTERNS = (
    re.compile(r"unhandled instruction bytes:.*"),
    re.compile(r"Process terminating with default action of signal \d+ \(\w+\).*"),
    re.compile(r"valgrind: .*(?:failed|error|cannot|Fatal|fatal|Unrecognised).*", re.I),
    re.compile(r"(?:Illegal opcode|Valgrind's memory management: out of memory|out of memory).*", re.I),
)


def failure_reason(output: str) -> str | None:
    """Valgrind's own reason for a failed run (e.g. an instruction it cannot execute), or None."""
    lines = [re.sub(r"^==\d+==\s*", "", ln).strip() for ln in output.splitlines()]
    for pattern in FAILURE_PATTERNS:
        for i, ln in enumerate(lines):
            if m := pattern.search(ln):
                text = m[0]
                if "unhandled instruction" in text:
                    text = "valgrind cannot execute an instruction of the kernel (vex: " + text + ")"
                elif "signal" in text and i + 1 < len(lines) and lines[i + 1].startswith("Illegal opcode"):
                    text += ": " + lines[i + 1]
                return text[:240]
    return None


def valgrind_binary() -> str | None:
    return shutil.which("valgrind")


def helper_library(build_root: Path) -> tuple[str | None, str]:
    """Build (once) the client-request helper; (path or None, why not)."""
    compiler = shutil.which("g++")
    if compiler is None:
        return None, "g++ not found"
    key = hashlib.sha256(HELPER_SOURCE.encode()).hexdigest()[:16]
    so_path = build_root / f"callgrind_helper_{key}.so"
    if so_path.exists():
        return str(so_path), ""
    build_root.mkdir(parents=True, exist_ok=True)
    src = build_root / f"callgrind_helper_{key}.cpp"
    src.write_text(HELPER_SOURCE)
    tmp = so_path.with_suffix(".tmp.so")
    proc = subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", str(src), "-o", str(tmp)], capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        return None, (
            "valgrind/callgrind.h not found (Debian ships it in the valgrind package)"
            if "callgrind.h" in proc.stderr
            else proc.stderr.strip()[-200:]
        )
    tmp.replace(so_path)
    return str(so_path), ""


# Valgrind (3.19 to at least 3.23) cannot execute AVX-512: a -march=native kernel built on an
# AVX-512 machine dies with SIGILL under it. The simulation run therefore builds the candidate
# with this compiler wrapper, which appends -mno-avx512f (AVX2 code) and reports a different
# --version line, so the fast path's build cache keeps the two builds apart.
CXX_WRAPPER = """#!/bin/sh
if [ "$1" = "--version" ]; then
  g++ --version | sed '1s/$/ [pragma callgrind build: -mno-avx512f]/'
  exit 0
fi
exec g++ "$@" -mno-avx512f
"""


def no_avx512_compiler(build_root: Path) -> str:
    """Path of the g++ wrapper used for the simulation build on AVX-512 machines."""
    path = build_root / "g++-no-avx512"
    if not path.exists() or path.read_text() != CXX_WRAPPER:
        build_root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(CXX_WRAPPER)
        tmp.chmod(0o755)
        tmp.replace(path)
    return str(path)


def _power_of_two_sets(level: dict[str, Any]) -> tuple[str, str]:
    """``size,assoc,line`` for valgrind, and a note when the size had to be rounded down."""
    ways, line = max(1, level["ways"]), level["line_bytes"]
    sets = level["sets"] or level["size_bytes"] // (ways * line)
    pow2 = 1 << max(0, sets.bit_length() - 1)
    size = pow2 * ways * line
    note = (
        ""
        if pow2 == sets
        else (
            f"{level['name']} {level['size_bytes'] // 1024} KiB has {sets} sets; "
            f"simulated as {size // 1024} KiB ({pow2} sets, {ways}-way)"
        )
    )
    return f"{size},{ways},{line}", note


def geometry(caches: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any], list[str]]:
    """(valgrind flags, the geometry used, notes) for I1, D1 and the last-level cache."""
    by_name = {c["name"]: c for c in caches}
    unified = [c for c in caches if c["type"] == "Unified"]
    chosen = {
        "I1": by_name.get("L1i"),
        "D1": by_name.get("L1d"),
        "LL": max(unified, key=lambda c: c["level"]) if unified else None,
    }
    flags, used, notes = [], {}, []
    for sim, level in chosen.items():
        if not level or not level.get("ways"):
            notes.append(f"{sim} geometry unknown (sysfs): valgrind's own detection used")
            continue
        spec, note = _power_of_two_sets(level)
        flags.append(f"--{sim}={spec}")
        used[sim] = {
            "from": level["name"],
            "size_bytes": int(spec.split(",")[0]),
            "ways": level["ways"],
            "line_bytes": level["line_bytes"],
        }
        if note:
            notes.append(note)
    return flags, used, notes


def entry_toggles(build_kinds: list[str]) -> list[str]:
    return sorted({ENTRY_TOGGLES[k] for k in build_kinds if k in ENTRY_TOGGLES})


def command_prefix(out_file: str, cache_flags: list[str], *, has_helper: bool, toggles: list[str]) -> list[str]:
    """callgrind collecting inside ``toggles`` (function patterns); with none, the region's client
    requests toggle collection around all the kernel calls."""
    cmd = [
        valgrind_binary() or "valgrind",
        "--tool=callgrind",
        "--vgdb=no",
        f"--callgrind-out-file={out_file}",
        "--cache-sim=yes",
        "--branch-sim=yes",
        "--collect-atstart=no",
        *cache_flags,
    ]
    if has_helper:
        cmd.append("--instr-atstart=no")
    return cmd + [f"--toggle-collect={t}" for t in toggles]


NAME_REF = re.compile(r"^\((\d+)\)(?: (.*))?$")


def _name(table: dict[str, str], raw: str) -> str:
    """Resolve callgrind's name compression: ``(12) name`` defines id 12, ``(12)`` refers to it."""
    m = NAME_REF.match(raw.strip())
    if not m:
        return raw.strip()
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1), raw.strip())


def parse(text: str) -> dict[str, Any]:
    """``{"events": [...], "totals": {event: n}, "functions": [{name, object, self: {event: n}}]}``."""
    events: list[str] = []
    positions = 1
    totals: dict[str, float] = {}
    names: dict[str, dict[str, str]] = {"fn": {}, "ob": {}}
    selfcost: dict[tuple[str, str], list[float]] = {}
    obj = fn = ""
    skip_next_cost = False  # the cost line after ``calls=`` is the call's inclusive cost
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.partition("=")
        if line.startswith("events:"):
            events = line.split(":", 1)[1].split()
        elif line.startswith("positions:"):
            positions = len(line.split(":", 1)[1].split())
        elif line.startswith(("totals:", "summary:")):
            values = [float(v) for v in line.split(":", 1)[1].split()]
            if line.startswith("totals:") or not totals:
                totals = dict(zip(events, values, strict=False))
        elif head == "ob" and _:
            obj = _name(names["ob"], rest)
        elif head == "fn" and _:
            fn = _name(names["fn"], rest)
        elif head in ("cob", "cfn") and _:
            _name(names["ob" if head == "cob" else "fn"], rest)  # registers compressed names only
        elif head == "calls" and _:
            skip_next_cost = True
        elif line[0].isdigit() or line[0] in "+-*":
            if skip_next_cost:
                skip_next_cost = False
                continue
            costs = line.split()[positions:]
            acc = selfcost.setdefault((obj, fn), [0.0] * len(events))
            for i, v in enumerate(costs[: len(events)]):
                acc[i] += float(v)
    functions = [
        {"name": f, "object": Path(o).name, "self": dict(zip(events, c, strict=False))}
        for (o, f), c in selfcost.items()
    ]
    functions.sort(key=lambda r: -r["self"].get("Ir", 0.0))
    return {"events": events, "totals": totals, "functions": functions}


def to_metrics(
    parsed: dict[str, Any], calls: int, line_bytes: int, min_bytes: float | None
) -> tuple[dict[str, dict], list[str]]:
    """Per-call metrics from the totals (events missing from the run count as absent, not 0)."""
    t, calls = parsed["totals"], max(1, calls)
    notes: list[str] = []
    if not t or not t.get("Ir"):
        return {}, ["callgrind counted no instructions inside the kernel's entry calls"]

    def total(*names: str) -> float | None:
        return sum(t[n] for n in names) if all(n in t for n in names) else None

    out: dict[str, dict] = {}
    per_call = {
        "sim_instructions": total("Ir"),
        "sim_data_accesses": total("Dr", "Dw"),
        "sim_d1_misses": total("D1mr", "D1mw"),
        "sim_ll_misses": total("ILmr", "DLmr", "DLmw"),
        "sim_branches": total("Bc", "Bi"),
        "sim_branch_mispredicts": total("Bcm", "Bim"),
    }
    for name, value in per_call.items():
        if value is not None:
            out[name] = metric(name, value / calls, SOURCE)
    acc, d1, ll, br, bm = (
        total("Dr", "Dw"),
        total("D1mr", "D1mw"),
        total("DLmr", "DLmw"),
        total("Bc", "Bi"),
        total("Bcm", "Bim"),
    )
    if acc and d1 is not None:
        out["sim_d1_miss_pct"] = metric("sim_d1_miss_pct", 100.0 * d1 / acc, SOURCE)
    if acc and ll is not None:
        out["sim_ll_miss_pct"] = metric("sim_ll_miss_pct", 100.0 * ll / acc, SOURCE)
    if br and bm is not None:
        out["sim_branch_mispredict_pct"] = metric("sim_branch_mispredict_pct", 100.0 * bm / br, SOURCE)
    if d1 is not None and min_bytes:
        out["sim_d1_traffic_ratio"] = metric("sim_d1_traffic_ratio", d1 / calls * line_bytes / min_bytes, SOURCE)
    return out, notes
