"""One LLM exchange for a node: build messages, call the role's model, record and account for it."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from pragma.graph.context import Context
from pragma.nodes import llm, recording

LOG_TEXT_CHARS = 20_000
log = logging.getLogger(__name__)


def model_spec(role: str, ctx: Context) -> str:
    if role == "coder":
        return ctx.coder_model
    return ctx.conductor_model or ctx.coder_model


@functools.lru_cache(maxsize=8)
def _price_table(path: str) -> dict[str, dict[str, float]]:
    try:
        return json.loads(Path(path).expanduser().read_text())
    except (OSError, ValueError) as exc:
        raise llm.LLMError(f"cannot read price table {path}: {exc}") from None


def cost_usd(ctx: Context, spec: str, input_tokens: float, output_tokens: float) -> float | None:
    """Cost of one call from the configured price table (USD per million tokens), None if unpriced."""
    if not ctx.price_table_path:
        return None
    prices = _price_table(ctx.price_table_path).get(spec)
    if prices is None:
        return None
    return (
        input_tokens * prices.get("input_usd_per_1m_tokens", 0.0)
        + output_tokens * prices.get("output_usd_per_1m_tokens", 0.0)
    ) / 1e6


def _thread_id() -> str:
    try:
        from langgraph.config import get_config

        return str(get_config()["configurable"].get("thread_id") or "unthreaded")
    except (RuntimeError, KeyError):
        return "unthreaded"


def _reasoning(reply: BaseMessage) -> str:
    # Servers that split reasoning out (DeepSeek-R1 style APIs) put it beside the content.
    extra = getattr(reply, "additional_kwargs", {}) or {}
    return str(extra.get("reasoning_content") or extra.get("reasoning") or "")


def invoke(
    role: str,
    ctx: Context,
    messages: list[BaseMessage],
    attempt: int,
    node: str,
    schema: type | None = None,
    grammar: str | None = None,
) -> tuple[str, dict[str, Any], Any]:
    """Call the role's model on ``messages``; returns the reply text, the state update and, when
    ``schema`` is given with a server-side structured method, the parsed object (or None).
    ``grammar`` (GBNF) goes in the request body for llama.cpp's constrained decoding."""
    spec = model_spec(role, ctx)
    runnable: Any = llm.load_chat_model(spec, role=role, timeout_s=ctx.llm_timeout_s)
    if grammar:
        # llama_cpp.server reads "grammar" from the chat request (CreateChatCompletionRequest);
        # extra_body puts it there through the OpenAI client unchanged.
        runnable = runnable.bind(extra_body={"grammar": grammar})
    if schema is not None and ctx.structured_output != "prompt":
        runnable = runnable.with_structured_output(schema, method=ctx.structured_output, include_raw=True)
    reply, parsed, text, update = _call(role, ctx, spec, runnable, messages, attempt, node)
    return text, update, parsed


def invoke_with_tools(
    role: str, ctx: Context, messages: list[BaseMessage], attempt: int, node: str, tools: list[Any]
) -> tuple[BaseMessage, dict[str, Any]]:
    """Call the role's model with ``tools`` bound; returns the raw reply (its ``tool_calls``) and
    the state update. Raises NotImplementedError when the model class cannot bind tools."""
    spec = model_spec(role, ctx)
    bound = llm.load_chat_model(spec, role=role, timeout_s=ctx.llm_timeout_s).bind_tools(tools)
    reply, _, _, update = _call(role, ctx, spec, bound, messages, attempt, node)
    return reply, update


_listeners: list[Callable[[dict[str, Any]], None]] = []


@contextlib.contextmanager
def listening(listener: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Have ``listener`` told what a model call in this process is doing while it waits (the CLI's
    progress lines; a small model thinks for minutes). A plain in-process hook rather than
    LangGraph's ``custom`` stream mode: that mode runs nodes off the main thread, where Ctrl-C and
    SIGTERM can no longer interrupt a hung model call."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def progress(event: dict[str, Any]) -> None:
    for listener in list(_listeners):
        try:
            listener(event)
        except Exception:  # a progress line must never fail a model call
            log.debug("progress listener failed", exc_info=True)


def _call(
    role: str,
    ctx: Context,
    spec: str,
    runnable: Any,
    messages: list[BaseMessage],
    attempt: int,
    node: str,
) -> tuple[BaseMessage, Any, str, dict[str, Any]]:
    """The one place a model is called: every call is timed, priced, logged and recorded."""
    parsed = None
    token = recording.current_call.set((node, attempt))
    progress({"event": "llm_call", "node": node, "role": role, "attempt": attempt})
    start = time.monotonic()
    try:
        reply = runnable.invoke(messages)
        if isinstance(reply, dict):  # with_structured_output(include_raw=True)
            reply, parsed = reply["raw"], reply.get("parsed")
    except Exception as exc:
        if not llm.is_transient(exc) and (line := llm.describe_error(exc, role)):
            raise llm.LLMError(line) from None
        raise  # transient: the node's RetryPolicy decides
    finally:
        recording.current_call.reset(token)
    wall_s = time.monotonic() - start
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    tool_calls = [
        {"name": c.get("name", ""), "args": c.get("args", {})} for c in getattr(reply, "tool_calls", None) or []
    ]
    # No text but a tool call: function_calling structured output (the JSON is the call's arguments),
    # or a server that answers every tool-bound request with a call (relay_openai.py), whose
    # arguments may hold the Conductor's whole answer. Logged as the reply, a replay answers with it.
    if not text and tool_calls:
        text = json.dumps(tool_calls[0]["args"])
    elif not text and (invalid := getattr(reply, "invalid_tool_calls", None)):
        text = str(invalid[0].get("args") or "")
    usage = {**llm.usage_of(reply, role), "llm_wall_s": wall_s}
    progress(
        {
            "event": "llm_reply",
            "node": node,
            "role": role,
            "attempt": attempt,
            "wall_s": wall_s,
            "output_tokens": usage["output_tokens"],
        }
    )
    # An empty spec is the embedded model, or the endpoint's only model (already listed, cached).
    spec = spec or ("local" if llm.is_local(spec, role) else llm.default_spec(role))
    cost = cost_usd(ctx, spec, usage["input_tokens"], usage["output_tokens"])
    if cost is not None:
        usage["cost_usd"] = cost
    recording.record(
        _thread_id(),
        node=node,
        role=role,
        attempt=attempt,
        model=spec,
        messages=messages,
        reply=text,
        reasoning=_reasoning(reply),
        usage=usage,
        tool_calls=tool_calls,
    )
    entry = {
        "role": role,
        "node": node,
        "attempt": attempt,
        "reply": text[:LOG_TEXT_CHARS],
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        "wall_s": wall_s,
        "cost_usd": cost if cost is not None else 0.0,
    }
    if tool_calls:
        entry["tool_calls"] = tool_calls
    return reply, parsed, text, {"usage": usage, "log": [entry]}


def ask(
    role: str, ctx: Context, system: str, human: str, attempt: int, node: str = "", grammar: str | None = None
) -> tuple[str, dict[str, Any]]:
    text, update, _ = invoke(
        role, ctx, [SystemMessage(system), HumanMessage(human)], attempt, node or role, grammar=grammar
    )
    return text, update
