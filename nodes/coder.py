"""coder (LLM): write the first candidate, repair the failed one, or refine the historical best.

Two candidate formats (``Context.candidate_format``): ``module`` (the model writes the whole Python
module) and ``kernel`` (the model writes one C++ function with the signature PRAGMA states, and
``tools/glue.py`` writes the module around it). Either way the candidate's ``code`` is a complete
module, so the verifier, the profiler and the export never see the difference.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from pragma.graph.context import Context
from pragma.graph.state import PragmaState
from pragma.knowledge import formulas
from pragma.nodes import budget, chat, hints, llm, prompts, verdict
from pragma.tools import glue
from pragma.tools.backends import backend_for
from pragma.tools.extract import ExtractionError, extract_code, strip_reasoning

if TYPE_CHECKING:
    from pragma.knowledge.formulas import LoopNames

log = logging.getLogger("pragma.coder")

# GBNF for llama.cpp's constrained decoding (the request's "grammar" field): the reply is exactly
# one fenced block, so a small model cannot answer with prose, a second block or the reference.
# Backticks never occur in the C++ or Python PRAGMA asks for, so "no backtick" delimits the block.
GRAMMAR_KERNEL = 'root ::= "```cpp\\n" code "```"\ncode ::= [^`]*\n'
GRAMMAR_MODULE = 'root ::= "```python\\n" code "```"\ncode ::= [^`]*\n'

# The start of the guidance a candidate was written from, kept with it (the report's lineage tree).
GUIDANCE_CHARS = 300


def _inputs_text(problem: dict) -> str:
    return json.dumps({"inputs": problem.get("inputs", []), "init_inputs": problem.get("init_inputs", [])})


def _feedback(state: PragmaState, last: dict) -> dict:
    """The previous candidate and its verifier result, for the single-agent prompt."""
    history = verdict.history(state.get("attempts", []), state.get("sweeps", []))
    return {
        "previous": state["candidate"]["iteration"],
        "code": prompts.failed_code(state["candidate"]),
        "status": last.get("status", ""),
        "message": last.get("message", ""),
        "log_tail": (last.get("log_tail") or "")[-3000:],
        "speedup": last.get("speedup", 0.0),
        "runtime_ms": last.get("runtime_ms", 0.0),
        "ref_runtime_ms": last.get("ref_runtime_ms", 0.0),
        "max_abs_diff": last.get("max_abs_diff", 0.0),
        "history": history,
        "best_speedup": (state.get("best") or {}).get("speedup", 0.0),
    }


def candidate_format(ctx: Context, problem: dict) -> tuple[str, str, dict[str, Any] | None]:
    """(format, fallback note, kernel spec): 'auto' means kernel for the embedded model; a problem
    the glue cannot describe falls back to module, with the reason in the note."""
    wanted = ctx.candidate_format
    if wanted == "auto":
        wanted = "kernel" if llm.is_local(chat.model_spec("coder", ctx), "coder") else "module"
    if wanted == "module":
        return "module", "", None
    try:
        return "kernel", "", glue.kernel_spec(problem, ctx.backend)
    except glue.KernelSpecError as exc:
        return "module", f"candidate_format=kernel falls back to module for {problem.get('name', '?')}: {exc}", None


def grammar_for(ctx: Context, fmt: str) -> str | None:
    mode = ctx.constrained_decoding
    if mode == "auto":
        mode = "grammar" if llm.is_local(chat.model_spec("coder", ctx), "coder") else "off"
    if mode == "off":
        return None
    return GRAMMAR_KERNEL if fmt == "kernel" else GRAMMAR_MODULE


def _human(
    state: PragmaState, ctx: Context, fmt: str, spec: dict[str, Any] | None, attempt: int, given: bool = False
) -> tuple[str, str]:
    """(origin, human prompt); ``given``: kernel format, and <formulas> gives the whole body."""
    problem = state["problem"]
    common = {
        "attempt": attempt,
        "name": problem["name"],
        "source": problem["source"],
        "inputs": _inputs_text(problem),
        "hardware": state.get("hardware", ""),
    }
    if spec is not None:
        common["signature"] = glue.prototype(spec)
    guidance = state.get("guidance") or {}
    best = state.get("best") or {}
    last = state.get("verification") or {}
    kernel = fmt == "kernel"
    if ctx.agent_mode == "single-agent" and state.get("candidate"):
        # KernelBench multi-turn: the Coder itself reads the compiler/correctness/runtime feedback,
        # with PRAGMA's fixed hint for the failure (nodes/hints.py).
        origin = "refine" if last.get("status") == "ok" else "repair"
        human = prompts.CODER_FEEDBACK.format(**common, **_feedback(state, last))
        if fix := hints.candidate_hints(last, state["candidate"], fmt):
            human += prompts.RULE_HINTS_SECTION.format(hints=fix)
        if kernel:
            human += prompts.KERNEL_SIGNATURE_SECTION.format(signature=common["signature"])
    elif guidance.get("mode") == "repair" and last.get("status") not in (None, "ok"):
        origin = "repair"
        template = prompts.CODER_REPAIR_KERNEL if kernel else prompts.CODER_REPAIR
        human = template.format(
            **common, status=last["status"], code=prompts.failed_code(state["candidate"]), guidance=guidance["text"]
        )
    elif best.get("code") and guidance.get("text"):
        origin = "refine"
        # A best written in module format stays a module; only a glue-generated best shows its C++.
        best_kernel = glue.kernel_of(best["code"]) if kernel else None
        template = prompts.CODER_REFINE_KERNEL if best_kernel else prompts.CODER_REFINE
        human = template.format(
            **common,
            tunables="" if given else prompts.TUNABLES_NOTE,
            best_speedup=best["speedup"],
            best_runtime_ms=best["runtime_ms"],
            best_code=best_kernel or best["code"],
            last_attempt=_last_attempt_section(state, kernel),
            guidance=guidance["text"],
        )
    else:
        origin = "initial"
        human = (prompts.CODER_FIRST_KERNEL if kernel else prompts.CODER_FIRST).format(**common)
    return origin, human


def _last_attempt_section(state: PragmaState, kernel: bool) -> str:
    """The last candidate's code when it verified but did not become the best. Why: the Conductor
    reads it (its profile, its verdict) and its guidance often says "keep attempt N's design"; a
    Coder shown only the best must rebuild that design from words (issue 34's transcripts: max
    pooling, attempts 3-4 of both runs)."""
    last = state.get("verification") or {}
    candidate = state.get("candidate") or {}
    best = state.get("best") or {}
    code = candidate.get("code") or ""
    if last.get("status") != "ok" or not code or code == best.get("code"):
        return ""
    shown = (glue.kernel_of(code) if kernel else None) or code
    vs = last.get("speedup_vs_best")
    return prompts.LAST_ATTEMPT_SECTION.format(
        iteration=candidate.get("iteration", "?"),
        speedup_vs_best=f"{vs:.3f}" if isinstance(vs, (int, float)) else "?",
        code=shown,
        why=(last.get("acceptance") or "not significantly faster").removeprefix("not accepted: "),
    )


def _formulas_section(problem: dict, spec: dict[str, Any] | None = None) -> str:
    """The definitions of the operators the problem's source calls (knowledge/formulas.py): a
    kernel-format Coder writes the math itself, and a small model often does not know it. Row
    loops are written in the names of the kernel ``spec``'s signature."""
    text = formulas.render(problem.get("source") or "", _loop_names(spec) if spec else formulas.DEFAULT_NAMES, spec)
    return prompts.FORMULAS_SECTION.format(formulas=text) if text else ""


def _loop_names(spec: dict[str, Any]) -> LoopNames:
    """The signature's first input and output, and its one 1-D weight and bias if it has them (a
    layer norm's per-column ones, a batch norm's per-channel ones)."""
    args = spec.get("args") or []
    first = next((a for a in args if a["role"] == "input" and a.get("shape")), None)
    out = next((a["name"] for a in args if a["role"] == "output"), "out0")
    weights = [a for a in args if a["role"] == "weight" and len(a.get("shape") or []) == 1]

    def named(suffix: str) -> str:
        matches = [a["name"] for a in weights if a["state_name"].rsplit(".", 1)[-1] == suffix]
        return matches[0] if len(matches) == 1 else ""

    if first is None:
        return formulas.DEFAULT_NAMES
    return formulas.LoopNames(
        x=first["name"], ndim=len(first["shape"]), out=out, weight=named("weight"), bias=named("bias")
    )


def _kernel_system(problem: dict, spec: dict[str, Any] | None = None) -> str:
    """The kernel-format system prompt: no example kernel where <formulas> gives the whole body
    (a loop over rows or channels, or over every element of one element-wise operator), else the
    element-wise example (a small model copies the example whatever the prompt says: shown its
    relu_fn, the embedded model wrote its own elu_fn beside PRAGMA's)."""
    given = formulas.gives_whole_body(problem.get("source") or "", spec)
    return prompts.CODER_SYSTEM_KERNEL_GIVEN if given else prompts.CODER_SYSTEM_KERNEL


def _memory_section(ctx: Context, problem: dict) -> str:
    """The most similar verified kernels (knowledge/kernels.py) within ``kernel_memory_tokens``.
    Kernels for this very problem (shipped or from an earlier run) are left out: they would be the
    answer, not an example, and would let one eval mode's run hand its result to another's."""
    if not ctx.kernel_memory or ctx.kernel_memory_tokens <= 0 or not problem.get("source"):
        return ""
    try:
        from pragma.eval.suites import category_from_name, same_category
        from pragma.knowledge import kernels

        own = {kernels.record_id(problem["source"], fmt) for fmt in ("kernel", "module")}
        # Only the problem's own category (its docstring's, else its name's as the suites classify
        # it): another category's kernel is no technique for this one. The embedded model copied it
        # as the answer (batch_norm_train, shown the memory's ReLU, wrote a ReLU), and KernelBench
        # problems, whose docstrings name none, were shown the streaming-store ReLU for a max pool
        # and a 1-D convolution (ablation transcripts, 2026-11-28). No category, no kernels.
        category = kernels.category_of(problem["source"]) or category_from_name(str(problem.get("name") or ""))
        found = [
            r
            for r in kernels.query(problem["source"], k=8, shipped_only=not ctx.kernel_memory_shared)
            if r["id"] not in own and same_category(str(r.get("category") or ""), category)
        ][:4]
        text = kernels.render(found, ctx.kernel_memory_tokens)
    except Exception as exc:  # the memory is a help, never a reason to stop a run
        log.warning("kernel memory unavailable: %s", " ".join(str(exc).split())[:200])
        return ""
    return prompts.VERIFIED_KERNELS_SECTION.format(kernels=text) if text else ""


def _parent(state: PragmaState, ctx: Context, origin: str) -> int:
    """The lineage node this candidate is written from: the best it refines, the failure it
    repairs (single-agent: the previous candidate, whose feedback it reads), none at first."""
    if origin == "initial":
        return 0
    single = ctx.agent_mode == "single-agent"
    if origin == "refine" and not single and (state.get("best") or {}).get("iteration"):
        return int(state["best"]["iteration"])
    return int((state.get("candidate") or {}).get("iteration", 0))


def coder(state: PragmaState, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    attempt = state.get("iteration", 0) + 1
    problem = state["problem"]
    fmt, note, spec = candidate_format(ctx, problem)
    if note and attempt == 1:
        log.warning(note)
    given = fmt == "kernel" and formulas.gives_whole_body(problem.get("source") or "", spec)
    origin, human = _human(state, ctx, fmt, spec, attempt, given)
    if variant := state.get("variant"):
        human += f"\n<variant>\n{variant}\n</variant>\n"
    if not given:
        # Where <formulas> hands over the whole body there is nothing to borrow: shown the memory's
        # l2_normalize kernel, the embedded model wrote batch_norm_train as l2_normalize's row loop.
        human += _memory_section(ctx, problem)
    if fmt == "kernel" and not (given and origin == "refine"):
        # Last, nearest the reply: what to compute outweighs how others were made fast (a small
        # model copies the code it read last, and the memory's kernels are other operators). Not
        # when refining a given body: the best kernel holds it, and shown it last the embedded
        # model replied with that plain loop three times instead of the streaming file the
        # guidance gave (make demo, ReLU).
        human += _formulas_section(problem, spec)
    # The backend decides the kernel language (C++ on cpu, Triton on gpu); the templates are shared.
    system = _kernel_system(problem, spec) if fmt == "kernel" else backend_for(ctx).coder_system
    human = budget.fit(
        system, human, budget.budget_for(ctx.prompt_budget_tokens, llm.is_local(chat.model_spec("coder", ctx), "coder"))
    )
    grammar = grammar_for(ctx, fmt)
    text, update = chat.ask("coder", ctx, system, human, attempt, **({"grammar": grammar} if grammar else {}))
    candidate: dict[str, Any] = {
        "iteration": attempt,
        "origin": origin,
        "format": fmt,
        "parent": _parent(state, ctx, origin),
    }
    if origin != "initial" and (guided := (state.get("guidance") or {}).get("text")):
        candidate["guidance"] = guided[:GUIDANCE_CHARS]  # what produced it, for the lineage tree
    if note:
        candidate["format_note"] = note
        for entry in update.get("log", []):
            entry["note"] = note
    try:
        if spec is not None:
            try:
                cpp = glue.extract_kernel(text, spec["entry"])
                if ctx.num_threads == 1:  # a mechanical fix with one reading (glue.without_collapse)
                    cpp = glue.without_collapse(cpp)
                candidate["kernel"] = cpp
                if given and (call := formulas.elementwise_call(problem.get("source") or "")):
                    candidate["given_call"] = call  # what repair checks the kernel calls
                candidate["code"] = glue.module_source(spec, glue.with_fast_forms(cpp))
            except glue.KernelExtractionError:
                # A model that wrote a whole module anyway is taken at its word (format module).
                candidate["code"] = extract_code(text)
                candidate["format"] = "module"
        else:
            candidate["code"] = extract_code(text)
    except ExtractionError as exc:
        # An unusable reply is a failed candidate; the verifier reports it and repair follows,
        # quoting the reply itself rather than this placeholder.
        why = (
            f'the reply contains no C++ code block defining extern "C" void {spec["entry"]}(...)'
            if spec is not None
            else str(exc)
        )
        candidate["code"] = f"# PRAGMA: {why}\nraise SyntaxError({why!r})\n"
        candidate["unusable_reply"] = strip_reasoning(text)[: prompts.UNUSABLE_REPLY_CHARS]
    return {**update, "iteration": attempt, "candidate": candidate}
