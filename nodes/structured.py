"""Structured replies (the Conductor's guidance): pydantic schema, robust parsing, one re-ask.

Servers differ: hosted APIs support json_schema, vLLM/llama.cpp json_mode, some only free text.
``Context.structured_output`` picks the method; whatever it is, a reply that does not validate
gets exactly one re-ask quoting the error, and then the caller falls back to the free text.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from pragma.graph.context import Context
from pragma.graph.state import add_usage
from pragma.nodes import chat
from pragma.tools.extract import strip_reasoning

T = TypeVar("T", bound=BaseModel)
JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
OBJECT = re.compile(r"\{.*\}", re.DOTALL)

REASK = (
    "Your reply could not be used: {error}\nReply again with only one JSON object that matches "
    "this schema, no other text:\n{schema}"
)


def parse_json_reply(text: str, schema: type[T]) -> tuple[T | None, str]:
    """The first JSON object in ``text`` that validates, else (None, the last error)."""
    clean = strip_reasoning(text)
    candidates = [m.group(1) for m in JSON_BLOCK.finditer(clean)]
    if m := OBJECT.search(clean):
        candidates.append(m.group(0))
    candidates.append(clean)
    error = "no JSON object found"
    for raw in candidates:
        try:
            return schema.model_validate(json.loads(raw)), ""
        except ValueError as exc:  # JSONDecodeError and pydantic's ValidationError are ValueErrors
            error = " ".join(str(exc).split())[:300]
    return None, error


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {"usage": add_usage(a.get("usage"), b.get("usage")), "log": a.get("log", []) + b.get("log", [])}


def ask_structured(
    role: str, ctx: Context, system: str, human: str, attempt: int, node: str, schema: type[T]
) -> tuple[T | None, str, dict[str, Any]]:
    """Returns (parsed or None, the reply text, the state update for all calls made)."""
    messages = [SystemMessage(system), HumanMessage(human)]
    text, update, parsed = chat.invoke(role, ctx, messages, attempt, node, schema=schema)
    if isinstance(parsed, schema):
        return parsed, text, update
    parsed, error = parse_json_reply(text, schema)
    if parsed is not None:
        return parsed, text, update
    return reask(role, ctx, system, human, attempt, node, schema, text, error, update)


def reask(
    role: str,
    ctx: Context,
    system: str,
    human: str,
    attempt: int,
    node: str,
    schema: type[T],
    text: str,
    error: str,
    update: dict[str, Any] | None = None,
) -> tuple[T | None, str, dict[str, Any]]:
    """The one re-ask after a reply ``text`` that did not validate (``error``): the conversation so
    far plus the error and the schema. Returns like ``ask_structured``, ``update`` merged in."""
    messages = [SystemMessage(system), HumanMessage(human)]
    retry = messages + [
        AIMessage(text),
        HumanMessage(REASK.format(error=error, schema=json.dumps(schema.model_json_schema()["properties"]))),
    ]
    text2, update2, parsed2 = chat.invoke(role, ctx, retry, attempt, node, schema=schema)
    update = _merge(update or {}, update2)
    if isinstance(parsed2, schema):
        return parsed2, text2, update
    parsed2, _ = parse_json_reply(text2, schema)
    return parsed2, (text2 if parsed2 is not None else text), update
