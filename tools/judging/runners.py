"""The runners' lifecycle as the judge sees it: commands and replies, shared-memory input bindings
(``base.Binding``), loading the problem and the implementations, guards, replacing a runner by a spare.

The runners were forked by ``main`` (session.py) before any seed existed; this module only talks
to them (``spawn.RunnerHandle``) and never imports candidate-side code."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import torch

from pragma.tools.judging import compare as cmp_mod
from pragma.tools.judging.base import JudgeState
from pragma.tools.judging.neighbours import _status_field, children_of, thread_count
from pragma.tools.judging.rules import RULES
from pragma.tools.judging.verdicts import Decided
from pragma.tools.wire import shm

TIMED_CANDIDATE = "candidate_timed"  # the candidate's second runner, timed against the best


# A second pair, loaded beside the best too, times a would-be acceptance once more (Judge.confirm),
# unless the first pair's CI clears the bar by more than any per-process bias measured
# (acceptance.needs_confirmation).
CONFIRM = {"candidate": "candidate_confirm", "best": "best_confirm"}


def _announce(workdir: Path, phase: str) -> None:
    with open(workdir / "progress.jsonl", "a") as f:
        f.write(json.dumps({"phase": phase, "t": time.time()}) + "\n")


def _import_file(path: str, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:  # not a Python source file (no loader for its suffix)
        raise ImportError(f"cannot import {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _list_in(rep: dict[str, Any], key: str) -> list[Any]:
    """``rep[key]`` when the runner sent a list there, else [] (a reply is not trusted to be well formed)."""
    value = rep.get(key)
    return value if isinstance(value, list) else []


def _nbytes(values: Any) -> int:
    return sum(t.numel() * t.element_size() for t in cmp_mod.tensors_of(values) if isinstance(t, torch.Tensor))


class RunnerLifecycle(JudgeState):
    """Talking to the runners and loading what they run. Mixed into ``session.Judge``, whose
    ``__init__`` sets the state read here (``req``, ``runners``, ``bindings``, ``problem``, ...:
    ``base.JudgeState``)."""

    # --- plumbing ---------------------------------------------------------------------------------

    def announce(self, phase: str) -> None:
        self.phase = phase
        _announce(self.workdir, phase)

    def ask(
        self, role: str, header: dict[str, Any], fds: list[int] | None = None, payload: Any = None
    ) -> dict[str, Any]:
        """A command to a runner; a dead runner or a malformed reply ends the verification."""
        h = self.runners[role]
        try:
            return h.request(header, fds, payload)
        except EOFError:
            raise self._died(role) from None
        except Exception as exc:  # ProtocolError and anything a hostile reply provokes
            raise Decided(
                {"status": "runtime_error", "message": f"the {role} process broke the protocol: {str(exc)[:300]}"}
            ) from None

    def _died(self, role: str) -> Decided:
        how = self.runners[role].reap()
        what = "candidate" if role == "candidate" else role
        hint = {
            "SIGKILL": f" (killed: out of memory? the address-space limit is {self.req['memory_limit_bytes']} bytes)",
            "SIGXCPU": " (CPU-time limit of the sandbox)",
        }.get(how, "")
        if how in ("SIGSEGV", "SIGBUS") and role in self.bindings and self.bindings[role].shared:
            hint = (
                " (while timed, the inputs are one read-only region shared by every implementation: "
                "a write into an input ends the process)"
            )
        return Decided(
            {
                "status": "runtime_error",
                "message": f"the {what} process died with {how} during phase '{self.phase}'{hint}",
            }
        )

    def _inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        inputs = list(self.problem.get_inputs())
        return inputs

    def fetch(self, role: str, copy: bool = True, precise: bool = False) -> Any:
        """The runner's last outputs, copied out of its output region into judge memory (``copy``
        false: views of the region, valid until the runner's next fetch; only for a stopped runner
        or one whose output is compared at once). ``precise``: the reference's last float64 output."""
        b = self.bindings[role]
        for _ in range(2):
            rep = self.ask(role, {"op": "fetch", "precise": precise})
            if rep.get("ok") is True:
                break
            need = rep.get("need_bytes")
            if type(need) is int and 0 < need <= int(self.req["memory_limit_bytes"]):
                if b.out_region is not None:
                    b.out_region.close()
                b.out_region = shm.Region(need * 2 if need < (1 << 28) else need, name=f"pragma-out-{role}")
                self.ask(role, {"op": "out_region", "size_bytes": b.out_region.size_bytes}, [b.out_region.fd])
                continue
            kinds = _list_in(rep, "kinds")
            bad = next(
                (f"output {i} is {str(k)[:40]}, expected a tensor" for i, k in enumerate(kinds) if k != "tensor"),
                f"outputs could not be read: {str(rep.get('error', ''))[:200]}",
            )
            raise (
                self.v.mismatch(f"{role}: {bad}", {})
                if role != "reference"
                else Decided({"status": "runtime_error", "message": f"reference outputs could not be read: {bad}"})
            )
        else:
            raise Decided({"status": "runtime_error", "message": f"{role} outputs could not be read"})
        specs = rep.get("outputs")
        if not isinstance(specs, list) or not 1 <= len(specs) <= 64:
            raise Decided({"status": "runtime_error", "message": f"{role}: malformed output list"})
        if b.out_region is None:
            # An honest runner asks for its output region (need_bytes) before it answers a fetch;
            # an "ok" without one is a forged reply, decided here rather than as a judge crash.
            raise Decided({"status": "runtime_error", "message": f"{role} broke the protocol: outputs before a region"})
        outs = []
        for i, spec in enumerate(specs):
            try:
                checked = shm.check_output_spec(spec, b.out_region.size_bytes, i)
            except ValueError as exc:
                raise Decided({"status": "runtime_error", "message": f"{role}: {exc}"}) from None
            view = b.out_region.view(checked)
            outs.append(view.clone() if copy else view)
        devices = _list_in(rep, "devices")
        self.extra.setdefault("devices", {})[role] = [str(d)[:20] for d in devices]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def call(self, role: str, **flags: bool) -> dict[str, Any]:
        rep = self.ask(role, {"op": "call", **flags})
        if rep.get("ok") is not True:
            kind = rep.get("kind")
            text = str(rep.get("error", "forward failed"))[:3000]
            if role == "reference":
                raise Decided({"status": "runtime_error", "message": f"the reference failed: {text}"})
            if kind == "memory":
                self.v.note("memory_limit", "fail", text[:300])
                raise Decided(
                    {
                        "status": "runtime_error",
                        "message": f"memory limit exceeded "
                        f"({self.req['memory_limit_bytes']} bytes of address space per sandbox): {text}",
                        "log_tail": str(rep.get("log_tail", ""))[-4000:],
                    }
                )
            raise Decided(
                {"status": "runtime_error", "message": text, "log_tail": str(rep.get("log_tail", ""))[-4000:]}
            )
        return rep

    # --- loading ----------------------------------------------------------------------------------

    def load(self) -> None:
        self.announce("load_problem")
        torch.manual_seed(self.seeds["problem_import"])
        self.problem = _import_file(self.req["problem_path"], "pragma_problem")
        torch.manual_seed(self.seeds["construct"])
        self.init_inputs = list(self.problem.get_init_inputs())
        common = {
            "op": "load",
            "construct_seed": self.seeds["construct"],
            "device": self.device,
            "num_threads": self.n_threads,
            "problem_path": self.req["problem_path"],
            "backend": self.req["backend"],
        }
        rep = self.ask(
            "reference",
            {
                **common,
                "path": self.req["problem_path"],
                "module_name": "pragma_problem",
                "class_name": "Model",
                "import_seed": self.seeds["problem_import"],
            },
            payload=self.init_inputs,
        )
        if rep.get("ok") is not True:
            raise Decided(
                {"status": "runtime_error", "message": f"the reference failed to load: {str(rep.get('error'))[:2000]}"}
            )
        self.announce("build")
        self._load_impl("candidate", "candidate.py", common)
        if "best" in self.runners:
            self.announce("build_best")
            try:
                self._load_impl("best", "best.py", common)
            except Decided as d:  # the best passed before; if it fails now, say so and go on
                self.best_error = d.result.get("message", "")[:500]
                self.runners.pop("best").kill()
                self.bindings.pop("best")
        spares = {TIMED_CANDIDATE: "candidate.py", CONFIRM["candidate"]: "candidate.py", CONFIRM["best"]: "best.py"}
        for spare, filename in spares.items():
            if spare not in self.runners:
                continue
            if "best" in self.runners:
                self._load_impl(spare, filename, common)
            else:
                self.runners.pop(spare).kill()
                self.bindings.pop(spare)
        for h in self.runners.values():
            h.extra["device"] = self.device
        caps = _status_field(self.runners["candidate"].pid, "CapEff")
        filtered = _status_field(self.runners["candidate"].pid, "Seccomp") == "2"
        self.isolation["runners"] = (
            "own processes and process groups, forked before any seed existed; own Landlock domains "
            f"(no signals, ptrace or /proc/<pid>/mem of the judge or each other); capabilities {caps or 'unknown'}"
            + (" (none)" if caps.strip("0") == "" and caps else "")
            + (
                "; seccomp filter: flock refused (no lock of PRAGMA's can be held); no scheduling, "
                "signals or memory of other processes, no affinity change (tools/launch/seccomp.py)"
                if filtered
                else "; no seccomp filter"
            )
            + "; stopped while others are timed"
        )

    def _load_impl(self, role: str, filename: str, common: dict[str, Any]) -> None:
        rep = self.ask(
            role,
            {
                **common,
                "path": str(self.workdir / filename),
                "module_name": f"pragma_{role}",
                "class_name": "ModelNew",
                "import_seed": self.seeds["candidate_import"],
            },
            payload=self.init_inputs,
        )
        builds = rep.get("builds")
        if role == "candidate" and isinstance(builds, list):
            self.builds = [
                {k: str(b.get(k, ""))[:500] for k in ("so_path", "source_path", "kind")}
                for b in builds[:8]
                if isinstance(b, dict)
            ]
        if rep.get("ok") is not True:
            status = "compile_error" if rep.get("kind") == "compile_error" else "runtime_error"
            result = {
                "status": status,
                "message": str(rep.get("error", "loading failed"))[:6000],
                "log_tail": str(rep.get("log_tail", ""))[-4000:],
                "failed_phase": self.phase,
            }
            if rep.get("kind") == "memory":
                self.v.note("memory_limit", "fail", result["message"][:300])
            raise Decided(result)

    def guard(self, when: str) -> None:
        """Process-level rules: the runner's own findings (advisory) and what /proc shows (not)."""
        allowance = 2 * (self.n_threads - 1)
        for role in ("candidate",):  # the best passed before: its quirks must not reject the candidate
            rep = self.ask(role, {"op": "guards", "thread_allowance": allowance})
            findings = _list_in(rep, "findings")
            for f in findings[:1]:
                if isinstance(f, list) and len(f) == 2 and f[0] in RULES:
                    raise self.v.reject(str(f[0]), f"{role}, {when}: {str(f[1])[:300]}")
            pid = self.runners[role].pid
            if kids := children_of(pid):
                raise self.v.reject(
                    "no_threads_or_processes", f"{role}, {when}: {len(kids)} child process(es) alive (seen in /proc)"
                )
            grown = thread_count(pid) - thread_count(self.runners["reference"].pid)
            if grown > allowance:
                raise self.v.reject(
                    "thread_budget",
                    f"{role}, {when}: {grown} more OS threads than the reference's "
                    f"process (allowed {allowance} at num_threads={self.n_threads}; /proc)",
                )

    def call_failed(self, role: str, rep: dict[str, Any]) -> NoReturn:
        text = str(rep.get("error", "forward failed"))[:3000]
        if role == "reference":
            raise Decided({"status": "runtime_error", "message": f"the reference failed while timed: {text}"})
        raise Decided({"status": "runtime_error", "message": f"{role} failed during timing: {text}"})

    def _replace_runner(self, role: str, spare: str) -> None:
        """``spare`` (forked at the start, loaded beside the best) becomes ``role``'s runner; the old one is killed."""
        self.runners.pop(role).kill()
        self.runners[role] = self.runners.pop(spare)
        self.bindings[role] = self.bindings.pop(spare)
        self.runners[role].cont()  # a confirmation spare waited stopped
        self.ask(role, {"op": "release"})  # as the first runner was released after its trials
