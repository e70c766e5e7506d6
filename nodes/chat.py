"""One LLM exchange for a node: build messages, call the role's model, account for it."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from pragma.graph.context import Context
from pragma.nodes import llm

LOG_TEXT_CHARS = 20_000


def model_spec(role: str, ctx: Context) -> str:
    if role == "coder":
        return ctx.coder_model
    return ctx.conductor_model or ctx.coder_model


def ask(role: str, ctx: Context, system: str, human: str, attempt: int,
        node: str = "") -> tuple[str, dict[str, Any]]:
    """Returns the reply text and the partial state update (usage, log) for this call."""
    model = llm.load_chat_model(model_spec(role, ctx), role=role, timeout_s=ctx.llm_timeout_s)
    start = time.monotonic()
    reply = model.invoke([SystemMessage(system), HumanMessage(human)])
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    usage = {**llm.usage_of(reply, role), "llm_wall_s": time.monotonic() - start}
    entry = {"role": role, "node": node or role, "attempt": attempt, "reply": text[:LOG_TEXT_CHARS],
             "input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"]}
    return text, {"usage": usage, "log": [entry]}
