"""The compiler's vectorization report (gcc -fopt-info-vec-all) for the kernel's own source lines."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

LINE = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<kind>optimized|missed|note): (?P<msg>.*)$")
WIDTH = re.compile(r"using (\d+) byte vectors")


def torch_extension_flags() -> list[str]:
    """Include paths a load_inline source needs (it includes <torch/extension.h>)."""
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    return [f"-I{p}" for p in [*include_paths(), sysconfig.get_paths()["include"]]] + [
        "-DTORCH_EXTENSION_NAME=pragma_report",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
    ]


DEFAULT_FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-std=c++17", "-fPIC")  # as cext


def collect(
    source_path: str,
    timeout_s: float = 180.0,
    extra_flags: list[str] | None = None,
    build_flags: list[str] | None = None,
) -> dict[str, Any]:
    """Compile ``source_path`` again with -fopt-info-vec-all (with the build's own flags when known)."""
    compiler = shutil.which("g++")
    if compiler is None:
        return {"status": "unavailable", "reason": "g++ not found"}
    if not Path(source_path).is_file():
        return {"status": "unavailable", "reason": f"kernel source not found: {source_path}"}
    # Link-only flags would turn -c into an error; the report needs compile flags only.
    flags = [f for f in (build_flags or DEFAULT_FLAGS) if f != "-shared" and not f.startswith("-Wl,")]
    try:
        proc = subprocess.run(
            [compiler, *flags, "-fopt-info-vec-all", *(extra_flags or []), "-c", source_path, "-o", "/dev/null"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"status": "unavailable", "reason": f"vectorization report took over {timeout_s:.0f} s"}
    return {"status": "ok", "text": proc.stderr, "source_path": source_path}


def parse(text: str, source_path: str) -> dict[str, Any]:
    """One verdict per loop of ``source_path``. Messages about headers are dropped, except a
    "missed" reason right after a kernel loop's miss: it names the inlined statement that blocked
    it (e.g. a libm call from <cmath>)."""
    name = Path(source_path).name
    loops: dict[int, dict[str, Any]] = {}
    last_missed: dict[str, Any] | None = None
    for raw in text.splitlines():
        m = LINE.match(raw.strip())
        if not m:
            continue
        msg = m["msg"].strip()
        if Path(m["file"]).name != name:
            if m["kind"] == "missed" and last_missed is not None and len(last_missed["missed"]) < 3:
                why = f"{msg} (in {Path(m['file']).name}:{m['line']})"
                if why not in last_missed["missed"]:
                    last_missed["missed"].append(why)
            continue
        line = int(m["line"])
        entry = loops.setdefault(
            line, {"line": line, "vectorized": False, "vector_bytes": 0, "versioned_for_alias": False, "missed": []}
        )
        last_missed = None
        if m["kind"] == "optimized" and "versioned for vectorization" in msg and "alias" in msg:
            entry["versioned_for_alias"] = True
        elif m["kind"] == "optimized" and "vectorized" in msg:
            entry["vectorized"] = True
            if w := WIDTH.search(msg):
                entry["vector_bytes"] = max(entry["vector_bytes"], int(w.group(1)))
        elif m["kind"] == "missed":
            if len(entry["missed"]) < 3 and msg not in entry["missed"]:
                entry["missed"].append(msg)
            last_missed = entry
    rows = sorted(loops.values(), key=lambda e: e["line"])
    # Lines with only "missed" notes about non-loops are noise; keep lines that mention loops.
    rows = [r for r in rows if r["vectorized"] or any("loop" in s or "vectoriz" in s for s in r["missed"])]
    return {
        "loops": rows,
        "vectorized_loops": sum(r["vectorized"] for r in rows),
        "missed_loops": sum(not r["vectorized"] for r in rows),
        "max_vector_bytes": max((r["vector_bytes"] for r in rows), default=0),
    }


def render(report: dict[str, Any], limit: int = 8) -> str:
    lines = [
        f"vectorization (gcc): {report['vectorized_loops']} loop(s) vectorized, "
        f"{report['missed_loops']} not; widest vectors {report['max_vector_bytes']} bytes"
    ]
    if report.get("note"):
        lines.append(f"  note: {report['note']}")
    for r in report["loops"][:limit]:
        if r["vectorized"]:
            extra = ", versioned for aliasing" if r["versioned_for_alias"] else ""
            lines.append(f"  line {r['line']}: vectorized ({r['vector_bytes']}-byte vectors{extra})")
        else:
            lines.append(f"  line {r['line']}: NOT vectorized: {'; '.join(r['missed'])[:200]}")
    return "\n".join(lines)
