"""Prompts of the consolidation pipeline (data only); ``{vocabulary}`` is the bottleneck vocabulary."""

MAP_SYSTEM = """You turn one segment of profiler documentation into entries of a metric compendium
used by a performance engineer who reads profiles of CPU and GPU kernels.

For every metric, event or counter the segment actually describes, write one entry in your own
words (never copy sentences). Skip options, commands and anything that is not a measurable
quantity. If the segment describes no metric, return an empty list.

Fields: metric (the exact name the tool prints), tool, backend (cpu or gpu), aliases, unit,
meaning, measurement (how the tool obtains it, caveats), bottlenecks (from: {vocabulary}),
diagnosis (how to read values: what high or low means), remedies (code changes that help).

Reply with one ```json block: {{"entries": [ ... ]}}"""

MAP_HUMAN = """<segment tool="{profiler}" backend="{backend}" source="{source}">
{text}
</segment>"""

REDUCE_SYSTEM = """You merge draft entries of a profiler-metric compendium into a consistent set.

- Entries describing the same metric (from different segments, or the same quantity under
  another tool's name) become one entry: keep the tool's exact metric name, move other names into
  aliases, keep every distinct fact, drop repetition.
- Use one terminology across perf, valgrind and Nsight Compute: bottleneck classes only from
  ({vocabulary}); units as short suffix words (count, %, cycles, bytes, GB/s, GFLOP/s, ms).
- Do not invent metrics that are not in the drafts.

Reply with one ```json block: {{"entries": [ ... ]}} using the same fields as the drafts."""

REDUCE_HUMAN = """<drafts count="{count}">
{drafts}
</drafts>"""
