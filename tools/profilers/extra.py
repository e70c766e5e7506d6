"""Extra metrics the Conductor (``guidance.extra_metrics``) or the CLI (``--events``) asks for.

Each requested name is validated and routed:
- a default metric name (``sim_d1_misses``, ``kernel_samples_pct``, ``topdown_memory_bound_pct``...)
  is already collected; naming one of a tool that is off by default here (callgrind, hot spots)
  switches that tool on for the next profile;
- aliases: ``topdown`` (top-down groups), ``callgrind``/``cache-simulation``, ``hotspots``,
  ``wider_vectors`` (the vector-width micro-profile);
- a perf metric or metric group (``tma_*``, ``Topdown*``, ``Pipeline*``, or one perf lists) goes to
  ``perf stat -M``;
- anything else that is a syntactically valid perf event (``dTLB-load-misses``,
  ``cpu/event=0x3c,umask=0x0/``, ``r01c2:u``) goes to ``perf stat -e``;
- everything else is rejected with a reason (never passed to perf: a name can't smuggle options).
perf may still refuse a valid-looking event; cpu.py then profiles again without the extras.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pragma.tools.profilers import topdown
from pragma.tools.profilers.metrics import DEFAULT_CPU_METRICS

MAX_EXTRA = 8
MAX_NAME_CHARS = 80
EVENT = re.compile(r"^[A-Za-z][\w.\-]*(:[ukhGHpPSD]+)?$")
PMU_EVENT = re.compile(r"^[A-Za-z][\w\-]*/[\w.=,\-]+/[ukhGHpPSD]*$")
PMU_NAME = re.compile(r"^[A-Za-z][\w\-]*$")
RAW_EVENT = re.compile(r"^r[0-9a-fA-F]{1,16}(:[ukhGH]+)?$")
METRIC_LIKE = re.compile(r"^(tma_\w+|Topdown\w*|TopDown\w*|Pipeline\w*)$")
ALIASES = {
    "topdown": "topdown",
    "top-down": "topdown",
    "callgrind": "simulation",
    "cache-simulation": "simulation",
    "cachegrind": "simulation",
    "valgrind": "simulation",
    "hotspots": "hotspots",
    "hot-spots": "hotspots",
    "perf-record": "hotspots",
    # the micro-profile that rebuilds the kernel for 256- and 512-bit vectors (tools/profilers/micro.py)
    "wider_vectors": "rebuild",
    "wider-vectors": "rebuild",
    "vector_width": "rebuild",
    "vector-width": "rebuild",
}


@dataclass
class ExtraRequest:
    events: list[str] = field(default_factory=list)  # perf stat -e
    metric_groups: list[str] = field(default_factory=list)  # perf stat -M
    force_simulation: bool = False
    force_hotspots: bool = False
    force_rebuild: bool = False  # the vector-width micro-profile, whatever profile_micro and the label say
    want_topdown: bool = False
    already_default: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict:
        return {
            "events": self.events,
            "metric_groups": self.metric_groups,
            "default": self.already_default,
            "force_simulation": self.force_simulation,
            "force_hotspots": self.force_hotspots,
            "force_rebuild": self.force_rebuild,
            "rejected": self.rejected,
        }


def resolve(
    names: list[str], perf_metrics: frozenset[str] = frozenset(), default_events: tuple[str, ...] = ()
) -> ExtraRequest:
    req = ExtraRequest()
    for raw in names:
        name = str(raw).strip()
        if not name:
            continue
        if len(req.events) + len(req.metric_groups) >= MAX_EXTRA:
            req.rejected[name] = f"more than {MAX_EXTRA} extra metrics requested"
            continue
        if len(name) > MAX_NAME_CHARS:
            req.rejected[name[:MAX_NAME_CHARS]] = "name too long"
            continue
        alias = ALIASES.get(name.lower())
        spec = DEFAULT_CPU_METRICS.get(name)
        if alias or spec:
            req.already_default.append(name)
            tool = alias or spec.tool
            req.force_simulation |= tool in ("simulation", "callgrind")
            req.force_hotspots |= tool == "hotspots"
            req.force_rebuild |= tool == "rebuild"
            req.want_topdown |= tool == "topdown"
        elif name in default_events:
            req.already_default.append(name)
        elif METRIC_LIKE.match(name) or name in perf_metrics:
            if topdown.normalize(name) and not name.startswith("tma_"):
                req.want_topdown = True
            if name not in req.metric_groups:
                req.metric_groups.append(name)
        elif EVENT.match(name) or PMU_EVENT.match(name) or RAW_EVENT.match(name):
            if name not in req.events:
                req.events.append(name)
        else:
            req.rejected[name] = "not a perf event, perf metric or PRAGMA metric name"
    return req


def split_names(text: str) -> list[str]:
    """Split a comma-separated list, keeping commas inside a ``pmu/a=1,b=2/`` term."""
    names, current, depth = [], "", 0
    for ch in text:
        # A slash opens a pmu term only right after a pmu name ("cpu/"), and the next one closes it.
        if ch == "/" and (depth or PMU_NAME.match(current.strip())):
            depth ^= 1
        if ch == "," and not depth:
            names.append(current)
            current = ""
        else:
            current += ch
    names.append(current)
    return [n.strip() for n in names if n.strip()]
