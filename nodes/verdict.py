"""The verifier's speed verdict on the last candidate, in words, for the Conductor and the Coder.

Issue 34: a profile read 5.79 -> 4.77 ms per call (task-clock, one profiling process) while the
verifier, timing the candidate and the best interleaved in the same rounds, read 5.29 vs 5.15 ms and
did not accept it; the next prompt showed the older kernel as the best without saying why. The
verdict says which kernel is the best and why, with the verifier's figures and CI, and that the
profile's own times are not the verdict.
"""

from __future__ import annotations

from typing import Any

from pragma.tools import tunables

PROFILE_TIMES = (
    "The profiles' per-call times (per_call_ms, task-clock) come from a separate profiling run "
    "(one process, not interleaved with the best): they explain where time goes, they are not the speed verdict."
)


def render(result: dict[str, Any], best: dict[str, Any], iteration: int, profiled: bool = True) -> str:
    """One short paragraph: correct or not, faster than the best or not, by the verifier's numbers
    (and, where the prompt shows profiles, that their times are not the verdict)."""
    if result.get("status") != "ok":
        return f"Attempt {iteration} failed verification ({result.get('status', '?')}): the best is unchanged."
    runtime, ref = float(result.get("runtime_ms", 0.0)), float(result.get("ref_runtime_ms", 0.0))
    low, high = (list(result.get("speedup_ci") or [0.0, 0.0]) + [0.0, 0.0])[:2]
    line = (
        f"Attempt {iteration} is correct: {runtime:.4g} ms against the reference's {ref:.4g} ms, "
        f"speedup {float(result.get('speedup', 0.0)):.3f}x (95% CI {low:.3f}-{high:.3f})."
    )
    best_iteration = int(best.get("iteration") or 0)
    vs_best = float(result.get("speedup_vs_best") or 0.0)
    b_low, b_high = (list(result.get("speedup_vs_best_ci") or [0.0, 0.0]) + [0.0, 0.0])[:2]
    best_ms = float(result.get("best_runtime_ms") or 0.0)
    head_to_head = (
        f" Timed against the best in the same interleaved rounds: {runtime:.4g} ms vs {best_ms:.4g} ms, "
        f"{vs_best:.3f}x the best's speed (95% CI {b_low:.3f}-{b_high:.3f})."
        if vs_best > 0 and best_ms > 0
        else ""
    )
    why = str(result.get("acceptance") or "").strip()
    if result.get("is_new_best") or best_iteration == iteration:
        line += head_to_head + f" The verifier accepted it: attempt {iteration} is now the best."
    elif best_iteration:
        line += (
            f" It is correct but not significantly faster than the best (attempt {best_iteration}, "
            f"{float(best.get('speedup', 0.0)):.3f}x)." + head_to_head
        )
        if why:
            line += f" Verifier: {why}."
        line += f" The best stays attempt {best_iteration}: the next candidate refines attempt {best_iteration}."
    elif why:
        line += f" Verifier: {why}."
    line += fixed_cost(result)
    return f"{line}\n{PROFILE_TIMES}" if profiled else line


# Below this share of the timed call the verifier's own cost per call goes unmentioned.
FIXED_COST_SHARE = 0.2


def fixed_cost(result: dict[str, Any]) -> str:
    """The part of every timed call that is the verifier's, not the kernel's, when it is large.

    Why (issue 34's ablation transcripts): a softmax kernel profiled at 0.015 ms per warm call was
    timed at 0.19 ms, the reference too; the Conductor, not told why, invented causes (Python
    overhead, cold misses) and chased them. The timed call includes an empty call's round trip to
    the runner and the reads that prove the output exists (docs/verifier.md), on inputs drawn anew
    before every call, the same for the reference: a kernel much shorter than that cannot move the
    ratio far."""
    runtime = float(result.get("runtime_ms") or 0.0)
    null_ms = float(result.get("null_round_trip_ms") or 0.0)
    spot_ms = float(result.get("spot_read_ms_per_call") or 0.0)
    fixed = null_ms + spot_ms
    if runtime <= 0 or fixed < FIXED_COST_SHARE * runtime:
        return ""
    return (
        f" About {min(fixed, runtime):.3g} ms of each {runtime:.3g} ms timed call is the verifier's own fixed cost "
        f"(an empty call's round trip {null_ms:.3g} ms, reading the output {spot_ms:.3g} ms), paid by the reference "
        "too, on inputs drawn anew before every call: only the rest is the kernel's, so a kernel this short moves "
        "the speedup little however much faster it gets."
    )


# The judged kernel time within this factor of the profile's warm calls reads as the warm regime; at
# or above this share of the cold calls' time, as the cold one.
WARM_WITHIN = 1.25
COLD_FROM = 0.8


def regime(result: dict[str, Any], profile: dict[str, Any]) -> str:
    """Where the verifier's timed calls sit between the profile's warm and cold calls, in one
    sentence the profile shows first; '' without both figures.

    Why (ablation transcripts, 2026-11-28): the profile times warm calls on one input, the verifier
    calls on inputs drawn anew before every call. A max pool's profile said 0.07 ms warm and
    0.285 ms cold while the verifier's kernel share was ~0.25 ms; no line said so, both Conductors
    guessed between prefetching and prefaulting, and a Winograd conv read '-12.8% better' in the
    profile and 0.957x in the verifier."""
    metrics = profile.get("metrics") or {}
    cold = float((metrics.get("cold_call_ms") or {}).get("value") or 0.0)
    ratio = float((metrics.get("cold_warm_ratio") or {}).get("value") or 0.0)
    runtime = float(result.get("runtime_ms") or 0.0)
    if cold <= 0 or ratio <= 0 or runtime <= 0:
        return ""
    warm = cold / ratio
    fixed = float(result.get("null_round_trip_ms") or 0.0) + float(result.get("spot_read_ms_per_call") or 0.0)
    kernel = max(runtime - fixed, 0.0)
    if kernel <= WARM_WITHIN * warm:
        where = "close to the warm calls: the figures below describe what is judged"
    elif kernel >= COLD_FROM * cold:
        where = (
            "as slow as the cold calls or slower: the judged calls pay cache misses (or first touches of fresh "
            "memory) that the warm figures below do not show; judge a change by the verifier's time, not by them"
        )
    else:
        where = "between the warm and the cold calls: the judged calls miss in cache part of the time"
    share = f", about {kernel:.3g} ms of it the kernel's" if fixed > 0 else ""
    return (
        f"the verifier timed {runtime:.3g} ms per call{share} (inputs drawn anew before every call); this profile's "
        f"warm calls took {warm:.3g} ms and calls after a cache flush {cold:.3g} ms: the judged calls are {where}."
    )


def is_not_faster(result: dict[str, Any], best: dict[str, Any], iteration: int) -> bool:
    """A correct candidate the verifier did not crown: the case the Coder must be told about."""
    return (
        result.get("status") == "ok"
        and not result.get("is_new_best")
        and int(best.get("iteration") or 0) not in (0, iteration)
    )


def for_coder(result: dict[str, Any], best: dict[str, Any], iteration: int) -> str:
    """The line the guidance to the Coder starts with when its last kernel was correct but not
    crowned, so that being shown the older best is explained; "" otherwise."""
    if not is_not_faster(result, best, iteration):
        return ""
    b_low, b_high = (list(result.get("speedup_vs_best_ci") or [0.0, 0.0]) + [0.0, 0.0])[:2]
    figures = (
        f" ({float(result['speedup_vs_best']):.3f}x the best's speed, 95% CI {b_low:.3f}-{b_high:.3f}, "
        f"timed by the verifier against it)"
        if float(result.get("speedup_vs_best") or 0.0) > 0
        else ""
    )
    best_iteration = int(best["iteration"])
    return (
        f"Your last kernel (attempt {iteration}) was correct but not significantly faster than the best "
        f"(attempt {best_iteration}){figures}, so the kernel below is still attempt {best_iteration}."
    )


def history(attempts: list[dict], sweeps: list[dict] | None = None) -> str:
    """One line per attempt: how it was made (a tuner attempt with its parameter values), its
    verdict, its speed against the best timed in the same rounds and whether it was accepted. Why
    (the ablation rerun's transcripts): a tuner attempt that switched on one prefetch per row read
    1.054x the best, under the bar; the next Conductor saw only "attempt 6: ok, speedup 2.039x" and
    told the Coder to keep "no software prefetch". Each tuner sweep follows the attempt it varied
    (``sweep_line``), also when nothing came of it. The Conductor's prompt and the single-agent
    Coder's feedback both show it: the verifier's record, not the profile's."""
    by_parent: dict[int, list[dict]] = {}
    for sw in sweeps or []:
        by_parent.setdefault(int(sw.get("parent") or 0), []).append(sw)
    lines = []
    for a in attempts:
        how = str(a.get("origin") or "")
        if params := a.get("params"):
            how += ": " + ", ".join(f"{k}={v}" for k, v in params.items())
        line = f"attempt {a['iteration']}" + (f" ({how})" if how else "") + f": {a['status']}"
        line += f", speedup {a['speedup']:.3f}x"
        if a["status"] == "ok":
            if (vs := float(a.get("speedup_vs_best") or 0.0)) > 0:
                line += f", {vs:.3f}x the best's speed in the same rounds"
            line += ", accepted as the new best" if a.get("is_new_best") else ", not accepted"
        lines.append(line)
        lines += [sweep_line(sw) for sw in by_parent.pop(int(a["iteration"]), [])]
    lines += [sweep_line(sw) for rest in by_parent.values() for sw in rest]
    return "\n".join(lines)


def sweep_line(sweep: dict) -> str:
    """A finished tuner sweep: every variant it timed with its speed against the point it varied
    (same rounds), the dimensions it had no time for, and what came of it. Why (ablation transcripts,
    2026-11-28): sweeps without a winner were shown nowhere; the Conductors asked again for
    STREAM=0, which the tuner had timed at 0.69-0.90x in every sweep, and LayerNorm's last attempt
    spent itself on it (0.714x)."""
    trials = sweep.get("trials") or []
    timed = []
    for t in trials:
        what = f"{tunables.label(str(t.get('dim', '')))}={t.get('value')}"
        if t.get("status") == "ok":
            timed.append(f"{what} {float(t.get('vs_point') or 0.0):.2f}x")
        else:
            timed.append(f"{what} {t.get('status')}")
    tried = {t.get("dim") for t in trials}
    untimed = [tunables.label(d["name"]) for d in sweep.get("dims") or [] if d["name"] not in tried]
    line = f"  tuner sweep of attempt {sweep.get('parent')} ({len(trials)} variant(s), {float(sweep.get('spent_s') or 0):.0f} s"
    line += ", each against the best point so far in the same rounds): " + ("; ".join(timed) or "none timed")
    if untimed:
        line += f"; not timed (budget): {', '.join(untimed)}"
    if sweep.get("child"):
        line += f"; its winner is attempt {sweep['child']}"
    elif sweep.get("gate"):
        line += f"; {sweep['gate']}"
    return line
