"""A runner: one implementation (the reference ``Model``, the candidate's or the best's ``ModelNew``)
in its own process, forked by the judge before the judge read any secret.

It only does what the judge asks over its socket (``protocol.py``): load and construct its module,
bind its inputs as views of a shared-memory region the judge owns, run ``forward`` on command, and
on a separate command copy its last outputs into its output region. Because the copy is a separate
command, the candidate cannot know while it computes whether this call's output will be checked.

Everything a runner reports (op recordings, compiled-call counts, guard findings) is advisory: in
the candidate's runner it comes from a process the candidate controls. Verdicts that must hold
against a hostile candidate are made by the judge from data it owns (shared memory it validates,
its own clock, ``/proc``).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from pragma.tools.inside import guards
from pragma.tools.inside.loading import import_file, is_compile_failure, is_memory_failure, record_load_inline
from pragma.tools.wire import protocol, shm


def failure(exc: BaseException, loading: bool) -> dict[str, Any]:
    """An exception from the implementation, as a reply (status proposed; the judge bounds it)."""
    kind = (
        "compile_error"
        if loading and is_compile_failure(exc)
        else ("memory" if is_memory_failure(exc) else "runtime_error")
    )
    text = str(exc)[-3000:]
    if kind == "compile_error":  # lead with the compiler's first error, not a context line
        first = next((ln for ln in text.splitlines() if "error" in ln.lower()), "")
        text = f"{first.strip()}\n{text}" if first else text
    return {
        "ok": False,
        "kind": kind,
        "error": f"{type(exc).__name__}: {text}"[:6000],
        "log_tail": traceback.format_exc()[-4000:],
    }


class Runner:
    def __init__(self, sock: socket.socket, role: str):
        self.sock, self.role = sock, role
        self.model: Any = None
        self.inputs: list[Any] = []  # views of the input region (and plain values)
        self.device_inputs: list[Any] | None = None  # CUDA copies, refreshed by ``sync``
        self.in_region: shm.Region | None = None
        self.out_region: shm.Region | None = None
        self.last: Any = None
        self.precise: Any = None  # the reference's last float64 output (op_precise), fetched on request
        self.models64: dict[bool, Any] = {}  # float64 copies of the reference model (key: magnitude)
        self.kept: list[Any] = []  # outputs of checked calls, alive so new outputs cannot reuse them
        self.counter: guards.CallCounter | None = None
        self.baseline: guards.Baseline | None = None
        self.builds: list[dict[str, Any]] = []
        self.device = "cpu"
        self.num_threads = 1
        self.problem_path = ""

    def serve(self) -> None:
        while True:
            try:
                header, fds, payload = protocol.recv_command(self.sock)
            except (EOFError, ConnectionError, OSError):
                return
            op = str(header.get("op", ""))
            if op == "exit":
                return
            handler = getattr(self, f"op_{op}", None)
            try:
                msg = handler(header, fds, payload) if handler else {"ok": False, "error": f"unknown op {op}"}
            except BaseException as exc:  # the implementation's failure is a reply, not a crash
                msg = failure(exc, loading=op == "load")
            protocol.reply(self.sock, msg)

    # --- loading ---------------------------------------------------------------------------------

    def op_load(self, h: dict[str, Any], fds: list[int], init_inputs: Any) -> dict[str, Any]:
        self.num_threads, self.device = int(h["num_threads"]), str(h.get("device", "cpu"))
        self.problem_path = str(h.get("problem_path", ""))
        torch.set_num_threads(self.num_threads)
        if self.role != "reference":
            import pragma.tools.inside.cext as cext

            sys.modules["pragma_cext"] = cext  # candidates import the fast path under this name
            self.builds = cext.BUILDS
            self.counter = guards.CallCounter()
            guards.prime()
            self.counter.wrap_cext(cext)
            if h.get("backend") == "gpu":
                from pragma.tools.inside.gpu_worker import install_triton_hook

                self.counter.wrap_triton()
                install_triton_hook(self.counter, self.device)
            try:
                source = Path(str(h["path"])).read_text(errors="replace")
            except OSError:
                source = ""
            if "cpp_extension" in source or "load_inline" in source:  # importing it costs ~1 s
                record_load_inline(self.builds, self.counter)
            self.baseline = guards.Baseline(self.num_threads)
        torch.manual_seed(int(h["import_seed"]))
        module = import_file(str(h["path"]), str(h["module_name"]))
        cls = getattr(module, str(h["class_name"]), None)
        if cls is None:
            raise AttributeError(f"{Path(h['path']).name} defines no class {h['class_name']}")
        torch.manual_seed(int(h["construct_seed"]))
        model = cls(*(init_inputs or []))
        if self.device != "cpu" and hasattr(model, "to"):
            model = model.to(self.device)  # KernelBench moves models to the GPU after construction
        self.model = model
        return {"ok": True, "builds": self.builds[-8:]}

    # --- inputs and outputs ----------------------------------------------------------------------

    def op_bind(self, h: dict[str, Any], fds: list[int], values: Any) -> dict[str, Any]:
        if self.in_region is not None:
            self.in_region.close()
        # read_only: the timed rounds' region, shared by every runner and sealed by the judge.
        writable = not h.get("read_only", False)
        self.in_region = shm.Region(int(h["size_bytes"]), fd=fds[0], writable=writable) if fds else None
        inputs = list(values or [])
        for spec in h.get("specs", []):
            inputs[spec["index"]] = self.in_region.view(spec)
        self.inputs = inputs
        self.device_inputs = None
        return self.op_sync(h, [], None)

    def op_sync(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        """CUDA: copy the host region into device tensors (outside any timed call)."""
        if self.device != "cpu":
            if self.device_inputs is None:
                self.device_inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in self.inputs]
            else:
                for dev, host in zip(self.device_inputs, self.inputs, strict=True):
                    if isinstance(dev, torch.Tensor):
                        dev.copy_(host)
            torch.cuda.synchronize()
        return {"ok": True}

    def op_out_region(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        if self.out_region is not None:
            self.out_region.close()
        self.out_region = shm.Region(int(h["size_bytes"]), fd=fds[0])
        return {"ok": True}

    def _args(self) -> list[Any]:
        return self.device_inputs if self.device_inputs is not None else self.inputs

    def op_call(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        self.last = None  # the previous output is freed before the call: one allocation policy for all
        record, count, check = bool(h.get("record")), bool(h.get("count")), bool(h.get("check"))
        recorder = guards.OpRecorder() if record else None
        before = self.counter.calls if self.counter is not None else 0
        args = self._args()
        with torch.no_grad():
            if count and self.counter is not None:
                with self.counter.counting():
                    out = self._forward(args, recorder)
            else:
                out = self._forward(args, recorder)
            if self.device != "cpu":
                torch.cuda.synchronize()  # the call's work ends before the judge's clock stops
        self.last = out
        # Where the output lies: the judge reads it from this process's memory itself (tools/judging/peek.py),
        # inside timed windows and for audits, with no message this process could tell apart.
        msg: dict[str, Any] = {"ok": True, "out": _where(out)}
        if count and self.counter is not None:
            msg["compiled_calls"] = self.counter.calls - before
        if recorder is not None:
            msg["compute_ops"] = list(dict.fromkeys(recorder.compute))[:20]
            msg["downcasts"] = recorder.downcasts[:5]
        if check:
            msg.update(self._form_and_overlap(out))
            self.kept.append(out)
        return msg

    def _forward(self, args: list[Any], recorder: guards.OpRecorder | None) -> Any:
        if recorder is None:
            return self.model(*args)
        with recorder:
            return self.model(*args)

    def _form_and_overlap(self, out: Any) -> dict[str, str]:
        others = [x for x in self._args() if isinstance(x, torch.Tensor)]
        for k in self.kept:
            others += guards.tensors_of(k)
        for i, t in enumerate(guards.tensors_of(out)):
            if (why := guards.output_form_problem(t)) is not None:
                return {"form": f"output {i}: {why}", "overlap": ""}
            if any(guards.overlaps(t, o) for o in others):
                return {"form": "", "overlap": f"output {i} shares memory with an input or an earlier output"}
        return {"form": "", "overlap": ""}

    def op_fetch(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        outs = guards.tensors_of(self.precise if h.get("precise") else self.last)
        kinds = ["tensor" if isinstance(t, torch.Tensor) else type(t).__name__ for t in outs]
        if any(k != "tensor" for k in kinds):
            return {"ok": False, "kinds": kinds, "error": "an output is not a tensor"}
        tensors = [t.detach() for t in outs]
        specs, size = shm.layout(tensors)
        if self.out_region is None or size > self.out_region.size_bytes:
            return {"ok": False, "need_bytes": size, "kinds": kinds}
        for spec, t in zip(specs, tensors, strict=True):
            self.out_region.view(spec).copy_(t)
        return {"ok": True, "outputs": specs, "kinds": kinds, "devices": [str(t.device) for t in tensors]}

    def _model64(self, magnitude: bool) -> Any:
        """A float64 copy of the reference model; with ``magnitude``, its float weights and buffers
        replaced by their absolute values. Built once each (the judge asks only after a failed
        comparison, so most verifications never pay for it)."""
        import copy

        if magnitude not in self.models64:
            model = copy.deepcopy(self.model)
            model = model.double() if hasattr(model, "double") else model
            if magnitude and hasattr(model, "parameters"):
                with torch.no_grad():
                    for t in [*model.parameters(), *model.buffers()]:
                        if t.is_floating_point():
                            t.abs_()
            self.models64[magnitude] = model
        return self.models64[magnitude]

    def op_precise(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        """The reference in float64 on its bound inputs: each float input times ``scales[i]`` (1 when
        absent), with ``magnitude`` on absolute values of inputs and weights. The judge's yardstick
        for rounding (compare.compare_precise); kept apart from ``last`` (fetch with ``precise``)."""
        if self.role != "reference":
            return {"ok": False, "error": "only the reference computes in float64"}
        magnitude = bool(h.get("magnitude"))
        scales = list(h.get("scales") or [])
        args = []
        for i, x in enumerate(self._args()):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                y = x.double()
                y = y.abs() if magnitude else y
                s = scales[i] if i < len(scales) and isinstance(scales[i], (int, float)) else 1.0
                x = y.mul(float(s)) if s != 1.0 else y
            args.append(x)
        model = self._model64(magnitude)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)  # tensors the forward creates (zeros, eye) follow
        try:
            with torch.no_grad():
                out = model(*args)
            if self.device != "cpu":
                torch.cuda.synchronize()
        finally:
            torch.set_default_dtype(previous)
        self.precise = out
        outs = guards.tensors_of(out)
        return {"ok": True, "dtypes": [str(t.dtype) if isinstance(t, torch.Tensor) else "" for t in outs]}

    # --- process-level checks and measurements ---------------------------------------------------

    def op_guards(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        findings: list[list[str]] = []
        if self.baseline is not None:
            findings += [list(f) for f in self.baseline.findings(int(h.get("thread_allowance", 0)))]
        if self.role != "reference" and self._contains_reference():
            findings.append(["no_reference_model", "ModelNew is (or contains) an instance of the reference Model"])
        return {"ok": True, "findings": findings[:10]}

    def _contains_reference(self) -> bool:
        modules = self.model.modules() if hasattr(self.model, "modules") else [self.model]
        for m in modules:
            source = getattr(sys.modules.get(type(m).__module__), "__file__", None)
            if type(m).__name__ == "Model" and source and self.problem_path:
                try:
                    if os.path.samefile(source, self.problem_path):
                        return True
                except OSError:
                    continue
        return False

    def op_release(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        """Stop counting calls (timed calls then run the plain ctypes/Triton paths)."""
        if self.counter is not None:
            self.counter.release()
        self.kept.clear()
        return {"ok": True}

    def op_burst(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        """Back-to-back calls for ``window_s`` (the judge reads CPU time from /proc around it)."""
        window_ns, calls, args = float(h["window_s"]) * 1e9, 0, self._args()
        t0 = time.perf_counter_ns()
        with torch.no_grad():
            while calls < 1 or (time.perf_counter_ns() - t0 < window_ns and calls < 10_000):
                self.model(*args)
                calls += 1
            if self.device != "cpu":
                torch.cuda.synchronize()
        return {"ok": True, "calls": calls}

    def op_flops(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        """FLOPs of one forward (torch's formulas: matmul/conv-like ops; a lower bound)."""
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            self.model(*self._args())
        return {"ok": True, "flops": int(counter.get_total_flops())}

    def op_ping(self, h: dict[str, Any], fds: list[int], payload: Any) -> dict[str, Any]:
        return {"ok": True}


def _where(out: Any) -> list[Any]:
    """Address, shape, stride and dtype of each output tensor on the host (None for anything else:
    the judge says so when it cannot read it)."""
    where: list[Any] = []
    for t in guards.tensors_of(out)[:64]:
        # Any tensor whose bytes lie in host memory (a subclass too: the bytes are what is judged).
        plain = isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type == "cpu"
        dtype = str(t.dtype).replace("torch.", "") if plain else ""
        where.append(
            {"ptr": t.data_ptr(), "shape": list(t.shape), "stride": list(t.stride()), "dtype": dtype} if plain else None
        )
    return where


def serve(sock: socket.socket, role: str) -> None:
    Runner(sock, role).serve()
