"""Hot spots of the kernel region: ``perf record -e cpu-clock`` (a software event, so it works in
VMs), started disabled and switched on/off around the kernel calls through perf's control fifo.

collect: ``command_prefix`` wraps the sandboxed worker; ``report`` runs ``perf report`` on the
recorded file. parse: rows of (share of samples, binary, symbol). The share inside the
candidate's own binary tells whether time goes to the kernel or to Python, allocation and
torch around it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from pragma.tools.profilers.metrics import metric
from pragma.tools.profilers.perf_stat import perf_binary

SOURCE = "perf record -e cpu-clock (kernel region)"
SAMPLE_PERIOD_NS = 250_000  # one sample per 0.25 ms of CPU time: 4 kHz per busy thread
SEPARATOR = "|"
MAX_SYMBOL_CHARS = 100


def command_prefix(ctl_fifo: str, ack_fifo: str, data_path: str, mount_proc: bool = False) -> list[str]:
    """perf record, started disabled; ``mount_proc`` when the sandbox runs in its own PID
    namespace (perf record refuses to read the parent namespace's /proc there)."""
    unshare = shutil.which("unshare")
    mount = [unshare, "--mount-proc"] if mount_proc and unshare else []
    return [
        *mount,
        perf_binary() or "perf",
        "record",
        "-q",
        "-e",
        "cpu-clock",
        "-c",
        str(SAMPLE_PERIOD_NS),
        "-o",
        data_path,
        "-D",
        "-1",
        "--control",
        f"fifo:{ctl_fifo},{ack_fifo}",
        "--",
    ]


def report(data_path: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Run ``perf report`` on a recorded file; ``{"status": "ok", "text": ...}`` or unavailable."""
    if not Path(data_path).is_file():
        return {"status": "unavailable", "reason": "perf record wrote no data"}
    try:
        proc = subprocess.run(
            [
                perf_binary() or "perf",
                "report",
                "-i",
                data_path,
                "--stdio",
                "--no-children",
                "--sort",
                "dso,sym",
                "--percent-limit",
                "0.5",
                "-t",
                SEPARATOR,
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"status": "unavailable", "reason": f"perf report exceeded {timeout_s:.0f} s"}
    if proc.returncode != 0:
        return {"status": "unavailable", "reason": (proc.stderr.strip().splitlines() or ["perf report failed"])[-1]}
    return {"status": "ok", "text": proc.stdout}


def parse(text: str) -> dict[str, Any]:
    """``{"samples": n, "rows": [{"pct", "dso", "symbol"}]}`` from ``perf report -t '|'`` output."""
    samples = 0
    rows = []
    for line in text.splitlines():
        if line.startswith("# Event count (approx.):"):
            # cpu-clock counts nanoseconds: exact sample count = count / period ("# Samples: 3K" is rounded)
            count = _float(line.split(":", 1)[1])
            samples = int(round(count / SAMPLE_PERIOD_NS)) if count else samples
            continue
        if line.startswith("# Samples:") and not samples:
            count = line.split(":", 1)[1].split()[0]
            mult = {"K": 1e3, "M": 1e6}.get(count[-1], 1)
            try:
                samples = int(float(count.rstrip("KM")) * mult)
            except ValueError:
                samples = 0
            continue
        if line.startswith("#") or SEPARATOR not in line:
            continue
        pct, dso, sym = (part.strip() for part in line.split(SEPARATOR, 2))
        try:
            value = float(pct.rstrip("%"))
        except ValueError:
            continue
        rows.append(
            {"pct": value, "dso": dso, "symbol": sym.removeprefix("[.] ").removeprefix("[k] ")[:MAX_SYMBOL_CHARS]}
        )
    rows.sort(key=lambda r: -r["pct"])
    return {"samples": samples, "rows": rows}


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


# Fewer samples than this and a share says nothing (the ablation's matrix-vector profile: 1 sample,
# in _int_malloc; the Conductor had to write the metric off as meaningless).
MIN_SHARE_SAMPLES = 50


def kernel_share(parsed: dict[str, Any], kernel_objects: list[str]) -> dict[str, dict]:
    """``kernel_samples_pct``: samples inside the candidate's own shared object(s); absent when
    perf took fewer than ``MIN_SHARE_SAMPLES`` samples."""
    names = {Path(p).name for p in kernel_objects if p}
    if not names or not parsed["rows"] or int(parsed.get("samples") or 0) < MIN_SHARE_SAMPLES:
        return {}
    share = sum(r["pct"] for r in parsed["rows"] if r["dso"] in names)
    return {"kernel_samples_pct": metric("kernel_samples_pct", share, SOURCE)}


def render(parsed: dict[str, Any], limit: int = 5) -> str:
    rows = [f"{r['pct']:.0f}% {r['symbol']} [{r['dso']}]" for r in parsed["rows"][:limit]]
    return f"hot spots ({parsed['samples']} cpu-clock samples): " + "; ".join(rows) if rows else ""
