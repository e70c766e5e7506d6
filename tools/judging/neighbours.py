"""What the judge reads of other processes in ``/proc``: CPU time, threads, children, scheduling.

Used to hold the candidate to its thread budget (per timed call and over the rounds), to catch a
runner that changed its nice value, policy or cores, and to charge CPU burnt beside the timed calls
(stray processes, reaped children) as a noisy neighbour. Functions at module level read ``/proc``;
``Neighbours`` holds the judge's checks over them (its state lives on the ``Judge``)."""

from __future__ import annotations

import math
import os
import time
from time import perf_counter_ns

from pragma.tools.judging.base import JudgeState

CORES_WINDOW_S = 0.2  # long against a scheduler tick (10 ms): the tick count's error is then <5%


# One timed call of the candidate may use num_threads cores for as long as it could run (from its
# SIGCONT to its stop), within these margins. Pinned, it cannot use more (tools/launch/seccomp.py); the
# clock is the scheduler's, exact for a stopped process, so the margins are small.
CALL_CORES_SLACK = 1.02


CALL_CPU_SLACK_NS = 100_000


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(path: str) -> list[bytes]:
    """Fields of a /proc stat file after ``comm``: index 0 is field 3 (state) of proc(5)."""
    try:
        with open(path, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def cpu_ticks(pid: int) -> int:
    """utime + stime of every thread of ``pid``, live or exited, plus cutime + cstime: the CPU of
    the children it reaped (clock ticks; 0 when it is gone). A child that shares the runner's
    memory, computes part of a call on another core and is reaped before the call returns leaves
    its CPU only there (issue 33): it is the candidate's CPU like its threads'."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return sum(int(fields[i]) for i in (11, 12, 13, 14))
    except (IndexError, ValueError):
        return 0


def child_ticks(pid: int) -> int:
    """cutime + cstime of ``pid``: CPU of its children that ran and were reaped (clock ticks)."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return int(fields[13]) + int(fields[14])
    except (IndexError, ValueError):
        return 0


def cpu_clock_ns(pid: int) -> int | None:
    """CPU time of every thread of ``pid``, live or exited, in ns (its process CPU clock: the
    scheduler's own runtime, not ticks). Exact for a stopped process (every thread is off the CPU,
    so none has time pending); None when the clock cannot be read."""
    try:
        return time.clock_gettime_ns((~pid << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except OSError:
        return None


def _cpu_list(text: str) -> frozenset[int]:
    """``0-3,6`` (a Cpus_allowed_list) as a set of CPU numbers."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit():
            out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def sched_of(pid: int, tid: int | None = None) -> tuple[int, int, frozenset[int]] | None:
    """(nice, scheduling policy, allowed CPUs) of one task from /proc; None when it is gone."""
    base = f"/proc/{pid}" if tid is None else f"/proc/{pid}/task/{tid}"
    fields = _stat_fields(f"{base}/stat")
    try:
        nice, policy = int(fields[16]), int(fields[38])  # fields 19 and 41 of proc(5)
    except (IndexError, ValueError):
        return None
    cpus = _status_field_at(f"{base}/status", "Cpus_allowed_list")
    return nice, policy, _cpu_list(cpus)


def _status_field_at(path: str, name: str) -> str:
    try:
        with open(path) as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith(name + ":")), "")
    except OSError:
        return ""


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _status_field(pid: int, name: str) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith(name + ":")), "")
    except OSError:
        return ""


def anon_huge_page_share(pid: int) -> float:
    """Share of ``pid``'s resident anonymous memory (its heap and unnamed mappings, where a runner's
    outputs live) that sits on transparent huge pages; -1.0 when /proc cannot say.

    Why it is reported: beside a busy ``pragma eval`` verifications of one kernel disagreed by more
    than their own CIs (a bias fixed per verification); whether a fresh runner's heap got huge pages
    while the machine's memory was being churned is one candidate cause (tools/launch/sandbox.py
    asks for them: THP_MEM_ALLOC_ENABLE)."""
    rss_kb = huge_kb = 0
    anon = False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(maxsplit=5)
                if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
                    name = head[5].strip() if len(head) > 5 else ""
                    anon = name in ("", "[heap]")
                elif anon and line.startswith("Rss:"):
                    rss_kb += int(line.split()[1])
                elif anon and line.startswith("AnonHugePages:"):
                    huge_kb += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return -1.0
    return huge_kb / rss_kb if rss_kb else -1.0


def children_of(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


class Neighbours(JudgeState):
    """The judge's checks over ``/proc``. Mixed into ``session.Judge`` (state: ``runners``,
    ``sched_expected``, ``idle_ticks``, ``stop_ticks``, ``call_cpu``, ``cores_from``, ``v``)."""

    def _judge_call_cpu(self, pid: int, cpu0: int | None, may_run_ns: int) -> None:
        """No share of any timed call on more than num_threads cores (``thread_budget``).

        Why per call: judged over a whole batch at 1.5 x num_threads (tick counts need slack), a
        helper thread that took a third of every call to another core kept the batch at ~1.4
        cores and gained up to 1.3x (issue 33). The candidate's runner is stopped before its call
        and after it, so its process CPU clock (live and exited threads, in ns) is exact at both
        reads and every ns of it fell between its SIGCONT and its stop: pinned to num_threads
        cores it cannot exceed num_threads x that span. Children are not in that clock: their CPU
        is judged over the timed rounds (``_judge_children``) and counted in ``cores_used``."""
        cpu1 = cpu_clock_ns(pid)
        if cpu0 is None or cpu1 is None or may_run_ns <= 0:
            return
        used_ns = cpu1 - cpu0
        cores = used_ns / may_run_ns
        self.call_cores_peak: float = max(self.call_cores_peak, cores)
        if used_ns > self.n_threads * may_run_ns * CALL_CORES_SLACK + CALL_CPU_SLACK_NS:
            raise self.v.reject(
                "thread_budget",
                f"a timed call of the candidate used {cores:.2f} cores at num_threads={self.n_threads}: "
                f"{used_ns / 1e6:.2f} ms of CPU in the {may_run_ns / 1e6:.2f} ms it could run "
                "(its process CPU clock, read while stopped): a thread or process on another core for part of a call",
            )

    def _check_scheduling(self, when: str) -> None:
        """Every task of every runner, and the judge's main thread, still has the nice value, policy
        and cores it was forked with (``fair_scheduling``): no process lowered another's priority or
        moved it. The candidate's filter refuses such calls (tools/launch/seccomp.py); this reads the result
        from /proc, so it also holds where no filter applied (another architecture, no seccomp)."""
        who = {h.pid: f"the {role} runner" for role, h in self.runners.items()}
        who[os.getpid()] = "the judge"
        for pid, expected in self.sched_expected.items():
            if pid not in who:
                continue  # a runner replaced since (killed)
            tids = [None] if pid == os.getpid() else [int(t) for t in _listdir(f"/proc/{pid}/task")]
            for tid in tids:
                now = sched_of(pid, tid)
                if now is None or now == expected:
                    continue
                raise self.v.reject(
                    "fair_scheduling",
                    f"{when}: {who[pid]} (task {tid or pid}) runs at nice {now[0]}, policy {now[1]}, cores "
                    f"{sorted(now[2])}; forked with nice {expected[0]}, policy {expected[1]}, cores "
                    f"{sorted(expected[2])} (/proc): its scheduling was changed",
                )

    def _judge_children(self, kids0: dict[int, int]) -> None:
        """Children of the candidate's runner that ran and were reaped during the timed rounds
        (cutime + cstime grew) reject it: a child sharing the runner's memory computed part of a
        call where no thread count or live-process check sees it (issue 33)."""
        pid = self.runners["candidate"].pid
        now = child_ticks(pid)
        grown = now - kids0.get(pid, now)
        if grown > 0:
            raise self.v.reject(
                "no_threads_or_processes",
                f"candidate: child processes ran during the timed rounds and were reaped before any check "
                f"({grown / _CLK_TCK * 1e3:.0f} ms of CPU in its cutime/cstime, /proc)",
            )

    def _strays(self) -> dict[str, int]:
        """``"pid (comm)"`` -> CPU ticks, for processes in the sandbox that are neither the judge nor a runner."""
        known = {os.getpid(), *(h.pid for h in self.runners.values())}
        pids: set[int] = set(children_of(os.getpid()))  # a runner's child cloned with CLONE_PARENT is the judge's
        for h in self.runners.values():
            pids.update(children_of(h.pid))
        if self.req["fresh_proc"]:  # own PID namespace and /proc: pid 1 is the sandbox's init
            pids.update(p for p in children_of(1) if p not in known)
        out = {f"{p} ({_status_field(p, 'Name')})": cpu_ticks(p) for p in pids - known}
        if self.req["fresh_proc"]:  # orphans (their parent exited first) are reaped by init: its cutime
            out["1 (init: orphans it reaped)"] = child_ticks(1)
        return out

    def _neighbour_verdict(self, strays: dict[str, int], samples: dict[str, list[float]]) -> None:
        stray_ticks = sum(strays.values())
        others_ms = sum(sum(v) for k, v in samples.items() if k == "reference")
        limit_ticks = max(2, math.ceil(others_ms / 1e3 * _CLK_TCK * 0.01))
        for role, ticks in self.idle_ticks.items():
            if ticks > limit_ticks:
                raise self.v.reject(
                    "noisy_neighbour",
                    f"the {role} process used {ticks / _CLK_TCK * 1e3:.0f} ms of CPU "
                    "while stopped for the other implementations' calls",
                )
        if stray_ticks > limit_ticks:
            raise self.v.reject(
                "noisy_neighbour",
                f"processes outside the runners used {stray_ticks / _CLK_TCK * 1e3:.0f}"
                " ms of CPU during the timed rounds: "
                + ", ".join(
                    f"{k} {t / _CLK_TCK * 1e3:.0f} ms" for k, t in sorted(strays.items(), key=lambda kv: -kv[1])[:5]
                ),
            )
        self.v.note(
            "noisy_neighbour",
            "pass",
            f"stopped while others ran: {sum(self.idle_ticks.values())} ticks "
            f"(limit {limit_ticks}); other processes {stray_ticks} ticks (/proc)",
        )

    def cores_used(self, roles: list[str]) -> dict[str, float]:
        """CPU seconds per wall second of each runner (from /proc): over its timed calls when they
        add up to CORES_WINDOW_S (the calls that decide the speedup, no extra time), else over a
        back-to-back window of calls (short kernels: too few scheduler ticks in the timed calls)."""
        out = {}
        for role in roles:
            ticks, ns = self.call_cpu.get(role, (0, 0))
            # The reference's figure is only shown beside the candidate's (the budget is the
            # candidate's): its timed calls suffice, however short, and save a window per verification.
            if ns >= CORES_WINDOW_S * 1e9 or (role == "reference" and ns > 0):
                out[role] = round(ticks / _CLK_TCK / (ns / 1e9), 3)
                self.cores_from[role] = f"{ns / 1e9:.2f} s of timed calls"
                continue
            self.cores_from[role] = f"a {CORES_WINDOW_S:.1f} s window of back-to-back calls"
            h = self.runners[role]
            if role != "reference":
                h.cont()
            c0, t0 = cpu_ticks(h.pid), perf_counter_ns()
            self.ask(role, {"op": "burst", "window_s": CORES_WINDOW_S})
            c1, t1 = cpu_ticks(h.pid), perf_counter_ns()
            if role != "reference":
                h.stop()
                self.stop_ticks[role] = cpu_ticks(h.pid)
            out[role] = round((c1 - c0) / _CLK_TCK / ((t1 - t0) / 1e9), 3) if t1 > t0 else 0.0
        return out
