"""Where each profiler's documentation lives. Adding a profiler = adding one ``Profiler`` entry.

A source is either a URL (crawled with LangChain's web loaders on machines with internet), a
command whose output documents metrics (``perf list --details``, ``ncu --query-metrics``), a man
page rendered by ``man``, or a local file. Local sources name the binary they need: where it is
missing the source is skipped with a note, because an absent tool has nothing to document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

SourceKind = Literal["url", "command", "man", "file"]


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    target: str  # URL, shell-free argv joined by spaces, man page name, or file path
    requires: str = ""  # binary that must exist for a local source (skip it otherwise)
    max_depth: int = 1  # URL sources: link depth followed under the same prefix
    optional: bool = False  # a failure is a note, not an error (an alternative source exists)

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.target}"


@dataclass(frozen=True)
class Profiler:
    name: str  # the tool name entries carry (MetricEntry.tool)
    backend: Literal["cpu", "gpu", "any"]
    sources: tuple[Source, ...] = field(default_factory=tuple)

    def local_sources(self) -> tuple[Source, ...]:
        return tuple(s for s in self.sources if s.kind != "url")


def _man(*pages: str) -> tuple[Source, ...]:
    # Optional: distributions often ship a tool without its man page (gcc on Debian slim images).
    return tuple(Source("man", p, requires="man", optional=True) for p in pages)


PROFILERS: dict[str, Profiler] = {
    p.name: p
    for p in (
        Profiler(
            "perf",
            "cpu",
            (
                Source("url", "https://perf.wiki.kernel.org/index.php/Tutorial"),
                Source("url", "https://man7.org/linux/man-pages/man1/perf-stat.1.html"),
                Source("url", "https://man7.org/linux/man-pages/man1/perf-list.1.html"),
                Source("url", "https://docs.kernel.org/admin-guide/perf-security.html"),
                Source("url", "https://www.kernel.org/doc/html/latest/userspace-api/perf_ring_buffer.html"),
                # -j (JSON) exists from perf 6.3; older perf only has the text form, tried second.
                Source(
                    "command",
                    "perf list -j --details hw sw cache pmu metric metricgroup",
                    requires="perf",
                    optional=True,
                ),
                Source("command", "perf list --details hw sw cache pmu metric metricgroup", requires="perf"),
                *_man("perf-stat", "perf-list", "perf-record"),
            ),
        ),
        Profiler(
            "perf-topdown",
            "cpu",
            (
                Source(
                    "url",
                    "https://www.intel.com/content/www/us/en/docs/vtune-profiler/cookbook/2023-0/top-down-microarchitecture-analysis-method.html",
                ),
                Source("url", "https://github.com/andikleen/pmu-tools/wiki/toplev-manual"),
                Source("url", "https://docs.amd.com/r/en-US/57368-uProf-user-guide"),
                Source("command", "perf list --details metricgroup", requires="perf"),
            ),
        ),
        Profiler(
            "callgrind",
            "cpu",
            (
                Source("url", "https://valgrind.org/docs/manual/cl-manual.html"),
                Source("url", "https://valgrind.org/docs/manual/cg-manual.html"),
                *_man("valgrind", "callgrind_annotate"),
            ),
        ),
        Profiler(
            "gcc-vectorization",
            "cpu",
            (
                Source("url", "https://gcc.gnu.org/onlinedocs/gcc/Developer-Options.html"),
                Source("url", "https://gcc.gnu.org/projects/tree-ssa/vectorization.html"),
                *_man("gcc"),
            ),
        ),
        Profiler(
            "objdump",
            "cpu",
            (
                Source("url", "https://sourceware.org/binutils/docs/binutils/objdump.html"),
                *_man("objdump"),
            ),
        ),
        Profiler(
            "ncu",
            "gpu",
            (
                Source("url", "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"),
                Source("url", "https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html"),
                Source("url", "https://docs.nvidia.com/cupti/main/main.html#metrics-reference"),
                Source("command", "ncu --query-metrics", requires="ncu"),
                Source("command", "ncu --list-sections", requires="ncu"),
            ),
        ),
    )
}


def profiler(name: str) -> Profiler:
    try:
        return PROFILERS[name]
    except KeyError:
        raise KeyError(f"unknown profiler {name!r}; known: {', '.join(PROFILERS)}") from None
