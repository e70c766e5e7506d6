"""Record every LLM exchange of a run, append-only, and replay a recorded run without a model.

Log: ``<data_dir>/llm_logs/<thread_id>.jsonl``, one JSON object per call with the full messages,
the full reply (reasoning included), usage and SHA-256 hashes of prompt and reply, written and
flushed before the node returns, so a killed run keeps every answer it paid for.

Replay answers by, in order: the exact same prompt (hash) from the same node; the same node and
attempt; the same role and attempt. The first two make replays of unchanged runs exact; the
fallbacks let an old run be re-evaluated on a hardened verifier whose messages (hence prompts) changed.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from pragma.graph.context import data_dir

ATTEMPT = re.compile(r"<attempt>(\d+)</attempt>")
# (node, attempt) of the call being made, set by nodes/chat.py around each model call.
current_call: contextvars.ContextVar[tuple[str, int]] = contextvars.ContextVar("current_call", default=("", 0))
_write_lock = threading.Lock()


def log_path(thread_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", thread_id) or "unthreaded"
    path = data_dir() / "llm_logs" / f"{safe}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def prompt_text(messages: list[BaseMessage]) -> str:
    return "\n\n".join(f"[{m.type}]\n{m.content}" for m in messages)


def recorded_model(thread_id: str, role: str) -> str | None:
    """The model spec a recorded run used for ``role`` (first matching call), None if unknown."""
    try:
        with open(log_path(thread_id)) as f:
            for line in f:
                entry = json.loads(line)
                if entry.get("role") == role:
                    return str(entry.get("model", ""))
    except (OSError, ValueError):
        pass
    return None


def record(
    thread_id: str,
    *,
    node: str,
    role: str,
    attempt: int,
    model: str,
    messages: list[BaseMessage],
    reply: str,
    reasoning: str,
    usage: dict[str, float],
    tool_calls: list[dict] | None = None,
) -> None:
    prompt = prompt_text(messages)
    entry = {
        "t": time.time(),
        "thread_id": thread_id,
        "node": node,
        "role": role,
        "attempt": attempt,
        "model": model,
        "prompt_sha256": sha256(prompt),
        "reply_sha256": sha256(reply),
        "messages": [{"type": m.type, "content": str(m.content)} for m in messages],
        "reply": reply,
        "reasoning": reasoning,
        "usage": usage,
        "tool_calls": tool_calls or [],
    }
    with _write_lock, open(log_path(thread_id), "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def rules_entry(node: str, attempt: int, reply: str) -> dict[str, Any]:
    """The state's log entry for Conductor guidance written by PRAGMA's rules, not a model: no
    tokens, no cost, ``source: rules``, so the report shows where the guidance came from."""
    return {
        "role": "conductor",
        "node": node,
        "attempt": attempt,
        "reply": reply,
        "input_tokens": 0.0,
        "output_tokens": 0.0,
        "wall_s": 0.0,
        "cost_usd": 0.0,
        "source": "rules",
    }


def read_log(thread_id: str) -> list[dict[str, Any]]:
    path = log_path(thread_id)
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a kill mid-write carries no usable answer
    return entries


_used: dict[str, set[int]] = {}


class ReplayChatModel(BaseChatModel):
    """Answers from a recorded run's log; never calls a model."""

    thread_id: str
    role: str
    entries: list[dict[str, Any]]

    @classmethod
    def for_thread(cls, thread_id: str, role: str = "") -> ReplayChatModel:
        from pragma.nodes.llm import LLMError

        entries = read_log(thread_id)
        if not entries:
            raise LLMError(f"no recorded LLM log for run {thread_id!r} (looked in {log_path(thread_id)})")
        return cls(thread_id=thread_id, role=role, entries=entries)

    @property
    def _llm_type(self) -> str:
        return "replay"

    def _pick(self, prompt_sha: str, node: str, attempt: int) -> dict[str, Any] | None:
        used = _used.setdefault(self.thread_id, set())
        # The same prompt must also come from the same node: the Conductor's tool round (skipped on
        # replay) sends the very prompt its structured answer then sends.
        tests = (
            lambda e: e["prompt_sha256"] == prompt_sha and e["node"] == (node or e["node"]),
            lambda e: e["node"] == node and e["attempt"] == attempt,
            lambda e: e["role"] == self.role and e["attempt"] == attempt,
        )
        for test in tests:
            for i, e in enumerate(self.entries):
                if i not in used and test(e):
                    used.add(i)
                    return e
        return None

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        from pragma.nodes.llm import LLMError

        node, attempt = current_call.get()
        if not attempt:
            found = ATTEMPT.findall(prompt_text(messages))
            attempt = int(found[-1]) if found else 0
        entry = self._pick(sha256(prompt_text(messages)), node, attempt)
        if entry is None:
            raise LLMError(f"run {self.thread_id!r} recorded no {node or self.role} reply for attempt {attempt}")
        # A replay spends no tokens: report zero so run accounting stays honest.
        meta = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        message = AIMessage(
            content=entry["reply"],
            usage_metadata=meta,
            response_metadata={"replayed_from": entry["prompt_sha256"][:12]},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
