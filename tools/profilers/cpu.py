"""CPU profile of a verified candidate: the best evidence this machine allows, and what it is.

Runs, each over the kernel region only (tools/inside/region.py switches the tool on and off):
1. counting: ``perf stat`` (software events everywhere; hardware events and top-down groups where
   the machine has counters) + the per-call time + the operation's FLOPs/bytes (roofline);
2. hot spots: ``perf record -e cpu-clock`` (``profile_hotspots``);
3. simulation: callgrind cache/branch simulation of the kernel calls alone, when hardware
   counters are missing (``profile_simulate``: auto | always | never) or a simulated metric is
   requested; its own call count and timeout;
then static evidence from the build (gcc vectorization report, objdump instruction mix), the
roofline against the machine's measured peaks, and a bottleneck label.

Confidence ranks the evidence: hardware-counters > simulation > static > timing-only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pragma.graph.context import Context
from pragma.tools import hardware
from pragma.tools.launch import timing_slot
from pragma.tools.profilers import (
    bottleneck,
    callgrind,
    extra,
    hotspots,
    instruction_mix,
    mca,
    micro,
    perf_stat,
    roofline,
    runs,
    topdown,
    vectorization,
)
from pragma.tools.profilers.metrics import metric

log = logging.getLogger(__name__)

CONFIDENCE_ORDER = ("hardware-counters", "simulation", "static", "timing-only")
MAX_LOOPS_KEPT = 12


def _static(
    build: dict[str, Any], sources: list[str], metrics: dict, notes: list[str], tools: dict, hot_symbols: list[str]
) -> tuple[dict | None, dict | None, dict | None]:
    vect = mix = loop = None
    # A load_inline source includes torch's headers: its report costs a full compile (~40 s).
    flags = vectorization.torch_extension_flags() if build["kind"] == "load_inline" else []
    t0 = time.monotonic()
    v = vectorization.collect(build["source_path"], extra_flags=flags, build_flags=build.get("flags"))
    tools["vectorization"] = {"status": v["status"], "wall_s": round(time.monotonic() - t0, 2)}
    if v["status"] == "ok":
        vect = vectorization.parse(v["text"], build["source_path"])
        sources.append("gcc vectorization report")
        for key in ("vectorized_loops", "missed_loops"):
            metrics[key] = metric(key, vect[key], "gcc -fopt-info-vec (static)")
        # The fast path does not record a build's own flags: the report then uses the defaults.
        tools["vectorization"]["flags"] = "build's own" if build.get("flags") else "default"
    else:
        tools["vectorization"]["reason"] = v["reason"]
        notes.append(f"vectorization report unavailable: {v['reason']}")
    i = instruction_mix.collect(build["so_path"])
    tools["instruction_mix"] = {"status": i["status"]}
    if i["status"] == "ok":
        mix = instruction_mix.parse(i["text"])
        sources.append("objdump instruction mix")
        for key in ("packed_fp", "scalar_fp", "fma", "widest_vector_bits"):
            metrics[key] = metric(key, mix[key], "objdump (static)")
        metrics["static_instructions"] = metric("static_instructions", mix["instructions"], "objdump (static)")
        # What the hot loop itself runs (the loop llvm-mca analyses): intrinsics code is vector
        # code whatever gcc's auto-vectorization report says (bottleneck.py reads this).
        if hot := mca.pick_hot_loop(mca.find_loops(i["text"]), hot_symbols):
            mix["hot_loop"] = {**instruction_mix.loop_mix(hot["body"]), "function": hot["function"]}
        if vect and not vect["vectorized_loops"] and instruction_mix.packed_dominates(mix):
            vect["note"] = (
                "gcc auto-vectorized no loop, but the hot loop already runs packed vector instructions "
                "(hand-written intrinsics or vector types): the kernel is vectorized"
            )
        if vect and vect["vectorized_loops"] and not mix["packed_fp"] and mix["scalar_fp"]:
            notes.append(
                "gcc's report claims vectorized loops but the built binary has no packed FP: "
                "the candidate's build flags (e.g. -O0) differ from the report's"
            )
        # The hot loop's throughput on this CPU's model: works where counters and valgrind do not
        # (AVX-512 binaries included), in well under a second.
        t0 = time.monotonic()
        loop = mca.analyse(i["text"], hot_symbols)
        tools["mca"] = {"status": loop["status"], "wall_s": round(time.monotonic() - t0, 2)}
        if loop["status"] == "ok":
            metrics.update(mca.to_metrics(loop))
            sources.append("llvm-mca hot-loop analysis (static)")
        else:
            tools["mca"]["reason"] = loop["reason"]
            notes.append(f"llvm-mca unavailable: {loop['reason']}")
            loop = None
    else:
        tools["instruction_mix"]["reason"] = i["reason"]
        notes.append(f"instruction mix unavailable: {i['reason']}")
    return vect, mix, loop


def _timed(tools: dict, name: str, fn: Callable[[], Any]) -> Any:
    t0 = time.monotonic()
    out = fn()
    tools.setdefault(name, {})["wall_s"] = round(time.monotonic() - t0, 2)
    return out


def _perf_part(
    parsed: dict[str, Any] | None,
    region: dict[str, Any],
    metrics: dict,
    unavailable: dict,
    notes: list[str],
    sources: list[str],
    tools: dict,
    tdown_groups: list[str],
) -> bool:
    """Merge perf stat's metrics into the profile; returns whether hardware counters worked."""
    if parsed is None:
        tools["perf_stat"]["status"] = "unavailable"
        tools["perf_stat"].setdefault("reason", "perf stat did not run")
        return False
    wanted = set(region.get("perf_events", []))
    # Events perf added for metric groups are inputs to those metrics, not metrics themselves.
    parsed = {**parsed, "events": {k: v for k, v in parsed["events"].items() if k in wanted}}
    pm, unavail, pnotes = perf_stat.to_metrics(
        parsed, int(region["calls"]), region["region_ms"], region.get("perf_groups", [])
    )
    metrics.update(pm)
    unavailable.update(unavail)
    notes += pnotes
    has_hw = perf_stat.has_hardware_counters(pm)
    sources.append(
        "perf stat hardware counters (kernel region)" if has_hw else "perf stat software events (kernel region)"
    )
    if any(k.startswith("topdown_") for k in pm):
        sources.append("perf top-down metrics")
    elif not tdown_groups:
        unavailable["topdown"] = "perf knows no top-down metric group (TopdownL1/PipelineL1) on this CPU"
    tools["perf_stat"].update(status="ok", phases_s=region.get("phases_s", {}))
    return has_hw


# Counted calls this many times slower than the warm calls timed after them are not steady (faults,
# first calls); the micro-experiment's own medians vary by ~10-20% between runs under load.
UNSTEADY_RATIO = 1.5


def _roofline_part(
    region: dict[str, Any],
    metrics: dict,
    peak: dict[str, Any],
    ctx: Context,
    notes: list[str],
    sources: list[str],
    unavailable: dict,
    builds: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    per_call_ms = float(region["per_call_ms"])
    roof_ms, basis = per_call_ms, "wall clock"
    cpu_ms = metrics.get("task-clock", {}).get("value")
    if ctx.num_threads == 1 and cpu_ms and cpu_ms < 0.9 * per_call_ms:
        # One thread that was on a core only part of the wall time: others' load preempted it,
        # and its CPU time is what the kernel itself needed.
        roof_ms, basis = cpu_ms, "task-clock (CPU time: the machine was busy, wall clock was longer)"
        notes.append(
            f"the kernel ran {100 * cpu_ms / per_call_ms:.0f}% of the wall-clock time (machine busy): "
            "per_call_ms overstates its cost; the roofline uses its CPU time"
        )
    micro = region.get("micro") or {}
    warm_ms = float(micro.get("warm_ms") or 0.0) if micro.get("status") == "ok" else 0.0
    if warm_ms > 0 and roof_ms > UNSTEADY_RATIO * warm_ms:
        # The counted calls were not the kernel's steady state: warm calls timed right after them
        # in the same process, counting off, were much faster. Why (ablation transcripts,
        # 2026-11-28): a LayerNorm's counted calls averaged 19.25 ms (126 page faults a call) while
        # its warm calls took 2.12 ms and the verifier 2.93 ms; the roofline read 11% of its roof
        # ("bandwidth is not what limits it") where a clean profile of the same design read 82%,
        # and the Conductor spent an attempt on it.
        faults = metrics.get("page-faults", {}).get("value")
        why = f" ({faults:.0f} page faults a call)" if faults else ""
        notes.append(
            f"the counted calls averaged {per_call_ms:.3g} ms{why}, {per_call_ms / warm_ms:.1f}x the {warm_ms:.3g} ms of warm "
            "calls timed right after them: not the kernel's steady state, so the roofline uses the warm calls' "
            "time and the counters per call overstate what a steady call costs"
        )
        roof_ms, basis = warm_ms, "warm calls (micro-experiment, counting off): the counted calls were slower"
    if region.get("op_cost_error"):
        notes.append(f"operation FLOPs/bytes not measured: {region['op_cost_error']}")
    # Streaming stores keep a kernel's outputs out of the caches, which changes the level its inputs
    # live in (roofline.py); one more objdump of the built kernel (~0.1 s) tells.
    streams = 0
    if builds:
        dump = instruction_mix.collect(builds[-1]["so_path"])
        streams = roofline.streaming_stores(dump.get("text", "")) if dump["status"] == "ok" else 0
    roof = roofline.compute(region.get("op_cost"), roof_ms, peak, ctx.num_threads, streaming_store_count=streams)
    if roof.get("status") != "ok":
        unavailable["roofline"] = roof["reason"]
        return roof
    roof["time_basis"] = basis
    metrics.update(roofline.to_metrics(roof))
    sources.append("roofline vs measured peaks")
    if roof.get("above_roof"):
        notes.append(roof["above_roof"])
    return roof


MIN_FLUSH_BYTES = 64 * 2**20


def _flush_bytes(spec: dict[str, Any]) -> int:
    """Bytes to read between cold calls: twice the last-level cache, at least 64 MiB."""
    llc = hardware.last_level_cache(spec)
    return max(MIN_FLUSH_BYTES, 2 * int(llc["size_bytes"]) if llc else 0)


COLD_RATIO_CACHED = 1.3  # cold calls this much slower than warm ones: the warm loop was cache-served
COLD_RATIO_STREAMING = 1.1  # within 10%: the caches did not matter (noise on this VM is a few %)


def _micro_part(
    micro: dict[str, Any], metrics: dict, notes: list[str], sources: list[str], unavailable: dict[str, str]
) -> None:
    """The region's micro-experiments as metrics, each with its source, and what they say."""
    if micro.get("status") != "ok":
        if micro:
            unavailable["micro_experiments"] = str(micro.get("reason", "not run"))
        return
    src = f"micro-experiment: median of {micro['calls_each']} calls, counting off"
    ratio = float(micro["cold_warm_ratio"])
    metrics["cold_call_ms"] = metric(
        "cold_call_ms", micro["cold_ms"], f"{src}, after writing {micro['flush_bytes'] >> 20} MiB"
    )
    metrics["cold_warm_ratio"] = metric("cold_warm_ratio", ratio, src)
    sources.append("micro-experiment (cold vs warm caches)")
    if ratio >= COLD_RATIO_CACHED:
        notes.append(
            f"cold calls (caches flushed) take {ratio:.2f}x the warm ones: the profiled loop is served from a "
            "cache, so a cache-level roof applies, not DRAM"
        )
    elif ratio <= COLD_RATIO_STREAMING:
        notes.append(
            f"cold calls take {ratio:.2f}x the warm ones: the data is not kept in cache between calls "
            "(DRAM-streaming or compute-bound), so a cache roof would overstate what is attainable"
        )
    else:
        notes.append(f"cold calls take {ratio:.2f}x the warm ones: part of the data is served from a cache")


def profile_candidate(
    problem_path: str, code: str, ctx: Context, extra_metrics: list[str] | None = None
) -> dict[str, Any]:
    started = time.monotonic()
    spec = hardware.cpu_spec()
    perf = perf_stat.perf_binary()
    req = extra.resolve(
        extra_metrics or [], topdown.available_metrics(perf) if perf else frozenset(), tuple(perf_stat.default_events())
    )
    tdown_groups = topdown.pick_groups(set(topdown.available_metric_groups(perf))) if perf else []
    tools: dict[str, dict[str, Any]] = {}
    notes: list[str] = [f"ignored extra metric {k!r}: {v}" for k, v in req.rejected.items()]
    if req.want_topdown and not tdown_groups:
        notes.append("top-down metrics requested but perf knows no TopdownL1/PipelineL1 group on this CPU")

    # 1. Counting run first, alone: its per-call time must not share the cores with other runs, so
    # it holds the machine's timing slot (other PRAGMA processes' timed phases wait, and it waits
    # for theirs). The candidate is already built by the verifier: the slot is held for seconds.
    with timing_slot.hold("profiler counting run") as slot:
        region, parsed, run_notes = _timed(
            tools,
            "perf_stat",
            lambda: runs.counting_run(
                problem_path,
                code,
                ctx,
                perf_stat.default_events(req.events),
                tdown_groups + req.metric_groups,
                flush_bytes=_flush_bytes(spec),
            ),
        )
    tools["perf_stat"]["timing_slot_waited_s"] = round(slot["waited_s"], 2)
    notes += run_notes
    if region.get("status") != "ok":
        return {
            "status": "unavailable",
            "backend": "cpu",
            "reason": f"profiled run failed: {str(region.get('message', ''))[:300]}",
            "sources": [],
            "confidence": "none",
            "metrics": {},
            "roofline": {},
            "bottleneck": "unknown",
            "notes": notes,
            "tools": tools,
            "profile_wall_s": round(time.monotonic() - started, 2),
        }
    if parsed is None and run_notes:
        tools["perf_stat"]["reason"] = run_notes[-1]
    metrics: dict[str, dict[str, Any]] = {
        "per_call_ms": metric("per_call_ms", region["per_call_ms"], "wall clock (profiled region)")
    }
    sources, unavailable = ["wall clock"], {}
    _micro_part(region.get("micro") or {}, metrics, notes, sources, unavailable)
    has_hw = _perf_part(parsed, region, metrics, unavailable, notes, sources, tools, tdown_groups)
    builds = region.get("builds") or []

    # 2. Peaks (measured once per machine) before anything runs beside them.
    peak = hardware.cached_peaks(spec)
    if peak is None:  # measured once per machine, timed like a kernel: the slot, then only then
        with timing_slot.hold("machine peaks"):
            peak = _timed(tools, "peaks", lambda: hardware.peaks(measure=ctx.measure_peaks))
    else:
        tools["peaks"] = {"wall_s": 0.0}
    tools["peaks"]["status"] = peak["status"]

    # 3. The simulation (callgrind: 30-60 s here, importing torch under valgrind is most of it) runs
    # only when asked for (profile_simulate=always, a sim_* metric in extra_metrics) or, with
    # profile_simulate=auto on a machine without counters, when the cheap evidence below leaves
    # the bottleneck ambiguous. Asked-for runs start now, in the background of the cheap tools.
    mode = ctx.profile_simulate if ctx.profile_simulate in ("auto", "always", "never") else "auto"
    forced = req.force_simulation or mode == "always"
    pool = ThreadPoolExecutor(max_workers=1)
    sim_future = None
    sim_started = time.monotonic()
    kinds = [b.get("kind", "") for b in builds]
    can_sim = callgrind.valgrind_binary() is not None
    if forced and can_sim:
        sim_future = pool.submit(runs.simulation_run, problem_path, code, ctx, spec, kinds)

    hot = None
    if not (ctx.profile_hotspots or req.force_hotspots):
        tools["hotspots"] = {"status": "skipped", "reason": "profile_hotspots is off"}
    elif not perf:
        tools["hotspots"] = {"status": "unavailable", "reason": "perf not installed"}
    else:
        hot, why = _timed(tools, "hotspots", lambda: runs.hotspot_run(problem_path, code, ctx))
        if hot is not None:
            tools["hotspots"]["status"] = "ok"
            metrics.update(hotspots.kernel_share(hot, [b["so_path"] for b in builds]))
            sources.append("perf record cpu-clock hot spots")
        else:
            tools["hotspots"].update(status="unavailable", reason=why)
            notes.append(f"hot spots unavailable: {why}")

    vect = mix = loop = None
    if builds:
        so_names = {b["so_path"].rsplit("/", 1)[-1] for b in builds}
        hot_symbols = [r["symbol"] for r in (hot or {}).get("rows", []) if r["dso"] in so_names]
        vect, mix, loop = _static(builds[-1], sources, metrics, notes, tools, hot_symbols)
    else:
        notes.append("no compiled kernel found (candidate built nothing through pragma_cext or load_inline)")
    roof = _roofline_part(region, metrics, peak, ctx, notes, sources, unavailable, builds)

    if sim_future is None:
        ambiguous = bottleneck.ambiguity(metrics, roof, vect, mix)
        if not can_sim and (forced or (mode == "auto" and not has_hw and ambiguous)):
            tools["callgrind"] = {"status": "unavailable", "reason": "valgrind not installed (Debian package valgrind)"}
            notes.append("no hardware counters and no valgrind: cache behaviour unmeasured")
        elif mode == "auto" and not has_hw and ambiguous:
            notes.append(f"callgrind run because the cheap evidence is ambiguous: {ambiguous}")
            sim_started = time.monotonic()
            sim_future = pool.submit(runs.simulation_run, problem_path, code, ctx, spec, kinds)
        else:
            tools["callgrind"] = {
                "status": "skipped",
                "reason": (
                    "hardware counters available"
                    if has_hw
                    else f"profile_simulate={mode}"
                    if mode != "auto"
                    else "cheap evidence is unambiguous (ask for a sim_* metric to run it)"
                ),
            }

    has_sim = False
    if sim_future is not None:
        try:
            sim, facts, sim_notes = sim_future.result()
        except Exception as exc:  # the simulation is one source among several, never the profile's end
            log.exception("callgrind run failed")
            sim, facts, sim_notes = None, {}, [f"callgrind run failed: {type(exc).__name__}: {exc}"]
        tools["callgrind"] = {**facts, "wall_s": round(time.monotonic() - sim_started, 2)}
        notes += sim_notes
        if sim is not None:
            line = next((g["line_bytes"] for g in facts.get("geometry", {}).values()), 64)
            sm, snotes = callgrind.to_metrics(sim, facts["calls"], line, (region.get("op_cost") or {}).get("min_bytes"))
            notes += snotes
            metrics.update(sm)
            has_sim = bool(sm)
        tools["callgrind"]["status"] = "ok" if has_sim else "unavailable"
        if has_sim:
            sources.append("callgrind cache/branch simulation (kernel only)")
        else:
            tools["callgrind"]["reason"] = (sim_notes or ["callgrind failed"])[-1]
    pool.shutdown()

    signals = bottleneck.signals_cpu(metrics, roof, vect, mix)
    label, why = signals[0] if signals else ("unknown", "no evidence separates the bottlenecks")
    answers = _micro_profiles(
        label, problem_path, code, ctx, spec, region, metrics, tools, loop, notes, req.force_rebuild
    )
    confidence = (
        "hardware-counters" if has_hw else "simulation" if has_sim else "static" if (vect or mix) else "timing-only"
    )
    confidence_reason = _confidence_reason(confidence, tools, unavailable, loop)
    if vect:
        vect = {**vect, "loops": vect["loops"][:MAX_LOOPS_KEPT]}
    return {
        "status": "ok",
        "backend": "cpu",
        "sources": sources,
        "confidence": confidence,
        "metrics": metrics,
        "roofline": roof,
        "confidence_reason": confidence_reason,
        "bottleneck": label,
        "bottleneck_evidence": why,
        "mca": loop or {},
        "micro_profiles": answers,
        "signals": [{"label": lab, "evidence": ev} for lab, ev in signals],
        "unavailable": unavailable,
        "notes": notes,
        "tools": tools,
        "vectorization": vect or {},
        "instruction_mix": mix or {},
        "hotspots": {"samples": hot["samples"], "rows": hot["rows"][:8]} if hot else {},
        "extra_metrics": req.summary(),
        "calls": int(region["calls"]),
        "profile_wall_s": round(time.monotonic() - started, 2),
    }


def _micro_profiles(
    label: str,
    problem_path: str,
    code: str,
    ctx: Context,
    spec: dict[str, Any],
    region: dict[str, Any],
    metrics: dict,
    tools: dict,
    loop: dict | None,
    notes: list[str],
    force_rebuild: bool = False,
) -> list[dict[str, Any]]:
    """The micro-profiles the label asks for (tools/profilers/micro.py), each with its cost; the
    vector-width rebuilds only with profile_micro=on or when the Conductor asked for them."""
    mode = getattr(ctx, "profile_micro", "cheap")
    if mode == "off":
        tools["micro_profiles"] = {"status": "skipped", "reason": "profile_micro=off"}
        return []
    t0 = time.monotonic()
    region_micro = region.get("micro") or {}
    mca_info = loop or {"status": "unavailable", "reason": tools.get("mca", {}).get("reason", "not run")}
    try:
        answers = micro.run(
            label,
            mca={**mca_info, "wall_s": tools.get("mca", {}).get("wall_s", 0.0)},
            traffic=region_micro.get("traffic")
            or (
                {"status": "skipped", "reason": f"micro-experiments not run: {region_micro.get('reason', '')}"}
                if region_micro
                else None
            ),
            # the traffic passes are timed warm, like the region's warm calls: compare like with like
            kernel_ms=float(region_micro.get("warm_ms") or metrics["per_call_ms"]["value"]),
            has_avx512=spec.get("simd") == "AVX-512",
            rebuild=(lambda: micro.collect_vector_widths(problem_path, code, ctx))
            if mode == "on" or force_rebuild
            else None,
            asked=("wider_vectors",) if force_rebuild else (),
        )
    except Exception as exc:  # an experiment is one more piece of evidence, never the profile's end
        log.exception("micro-profiles failed")
        notes.append(f"micro-profiles failed: {type(exc).__name__}: {str(exc)[:200]}")
        answers = []
    tools["micro_profiles"] = {
        "status": "ok",
        "questions": [a["question"] for a in answers],
        "wall_s": round(time.monotonic() - t0, 2),
    }
    return answers


def _confidence_reason(confidence: str, tools: dict, unavailable: dict, loop: dict | None) -> str:
    """Why the profile has this confidence and not a higher one, in words (a reasoned ``static``)."""
    if confidence == "hardware-counters":
        return "perf read the CPU's hardware counters over the kernel region"
    why = ["no hardware counters (perf reports cycles/instructions as not supported)"]
    sim = tools.get("callgrind", {})
    if confidence == "simulation":
        return why[0] + "; callgrind simulated the kernel's caches and branches"
    why.append(f"callgrind {sim.get('status', 'not run')}: {sim.get('reason', '')}".rstrip(": "))
    if confidence == "static":
        why.append(
            "evidence is static (compiler report, instruction mix"
            + (", llvm-mca on the hot loop)" if loop else ")")
            + " plus measured time and roofline"
        )
    return "; ".join(why)


def render_profile(profile: dict[str, Any]) -> str:
    """The profile as prompt text: sources and confidence first, then label, roofline, metrics."""
    if profile.get("status") != "ok":
        return f"profile unavailable: {profile.get('reason', '')}"
    # Where the verifier's calls sit against this profile's (nodes/verdict.regime), then the
    # micro-profiles' answers: each settles a question the metrics below leave open.
    lines = [f"judged vs profiled: {profile['judged_regime']}"] if profile.get("judged_regime") else []
    lines += [micro.render(profile["micro_profiles"])] if profile.get("micro_profiles") else []
    lines += [
        f"sources: {', '.join(profile['sources'])}; confidence: {profile['confidence']}"
        + (f" ({profile['confidence_reason']})" if profile.get("confidence_reason") else ""),
        f"bottleneck: {profile['bottleneck']} ({profile.get('bottleneck_evidence', '')})",
    ]
    others = [s for s in profile.get("signals", [])[1:]]
    if others:
        lines.append("other signals: " + "; ".join(f"{s['label']} ({s['evidence']})" for s in others))
    if profile.get("roofline", {}).get("status") == "ok":
        lines.append(roofline.render(profile["roofline"]))
    by_source: dict[str, list[str]] = {}
    for name, m in profile["metrics"].items():
        by_source.setdefault(m["source"], []).append(f"{name} {m['value']:.4g} {m['unit']}")
    lines += [f"- [{source}] " + ", ".join(items) for source, items in by_source.items()]
    if profile.get("unavailable"):
        by_reason: dict[str, list[str]] = {}
        for name, reason in profile["unavailable"].items():
            by_reason.setdefault(reason, []).append(name)
        lines.append(
            "unavailable: " + "; ".join(f"{', '.join(names)} ({reason})" for reason, names in by_reason.items())
        )
    if profile.get("hotspots"):
        lines.append(hotspots.render(profile["hotspots"]))
    if profile.get("vectorization"):
        lines.append(vectorization.render(profile["vectorization"]))
    if profile.get("instruction_mix"):
        lines.append(instruction_mix.render(profile["instruction_mix"]))
    if profile.get("mca"):
        lines.append(mca.render(profile["mca"]))
    lines += [f"note: {n}" for n in profile.get("notes", [])]
    return "\n".join(lines)
