"""Scripted chat model: the only fake in the test suite (it stands in for the LLM).

Replies are looked up by (role, attempt): the role comes from the node that loads the model and
the attempt from the ``<attempt>N</attempt>`` tag every PRAGMA prompt carries, so a run resumed
in another process gets the same replies. The replies hold real kernels that really compile.

Environment hooks (for resume tests across processes):
- PRAGMA_TEST_LLM_LOG: JSONL file; every call appends {role, attempt, pid}.
- PRAGMA_TEST_HANG_AT=role:N: that call writes PRAGMA_TEST_HANG_MARKER and sleeps (to be SIGKILLed).
- PRAGMA_TEST_RAISE_AT=role:N: that call raises once (PRAGMA_TEST_RAISE_MARKER records it).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

ATTEMPT = re.compile(r"<attempt>(\d+)</attempt>")
CANDIDATES = Path(__file__).parent / "data" / "candidates"


class ScriptedChatModel(BaseChatModel):
    role: str
    script: dict[str, dict[str, str]]
    # relay_tools: tools can be bound, and a tool-bound request is answered the way
    # ../shared/tools/relay_openai.py answers one: the reply becomes a call of the first tool (or of
    # the tool a first line ``tool: NAME`` names) with the rest as its arguments.
    relay_tools: bool = False
    bound_tools: list[str] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        if not self.relay_tools:
            return super().bind_tools(tools, **kwargs)  # NotImplementedError: no tool support
        return self.model_copy(update={"bound_tools": [getattr(t, "name", str(t)) for t in tools]})

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        found = ATTEMPT.findall(prompt)
        attempt = int(found[-1]) if found else 0
        key = f"{self.role}:{attempt}"
        if log := os.environ.get("PRAGMA_TEST_LLM_LOG"):
            with open(log, "a") as f:
                f.write(json.dumps({"role": self.role, "attempt": attempt, "pid": os.getpid()}) + "\n")
        if os.environ.get("PRAGMA_TEST_HANG_AT") == key:
            Path(os.environ["PRAGMA_TEST_HANG_MARKER"]).write_text(key)
            time.sleep(3600)
        marker = os.environ.get("PRAGMA_TEST_RAISE_MARKER", "")
        if os.environ.get("PRAGMA_TEST_RAISE_AT") == key and marker and not Path(marker).exists():
            Path(marker).write_text(key)
            raise RuntimeError(f"scripted failure at {key}")
        try:
            text = self.script[self.role][str(attempt)]
        except KeyError:
            raise KeyError(f"the script has no reply for {key}") from None
        usage = {
            "input_tokens": len(prompt) // 4,
            "output_tokens": len(text) // 4,
            "total_tokens": (len(prompt) + len(text)) // 4,
        }
        if self.bound_tools:
            return ChatResult(generations=[ChatGeneration(message=_as_tool_call(text, self.bound_tools, usage))])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=usage))])


def _as_tool_call(text: str, tools: list[str], usage: dict[str, int]) -> AIMessage:
    """The relay's answer to a tool-bound request: JSON arguments become a tool call, anything
    else an invalid one (as langchain-openai reports arguments that are not JSON)."""
    name = tools[0]
    if text.startswith("tool:"):
        first, _, text = text.partition("\n")
        name = first.split(":", 1)[1].strip()
    try:
        args = json.loads(text)
    except ValueError:
        args = None
    if isinstance(args, dict):
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call_1"}], usage_metadata=usage)
    invalid = [{"name": name, "args": text.strip(), "id": "call_1", "error": "not JSON", "type": "invalid_tool_call"}]
    return AIMessage(content="", invalid_tool_calls=invalid, usage_metadata=usage)


def loader_for(script: dict[str, dict[str, str]], relay_tools: bool = False):
    """A drop-in for pragma.nodes.llm.load_chat_model that serves ``script`` (``relay_tools``: tool
    calls as relay_openai.py makes them, see ScriptedChatModel)."""

    def load_chat_model(spec: str, *, role: str = "", timeout_s: float = 600.0) -> BaseChatModel:
        if not spec:
            from pragma.nodes.llm import LLMNotConfigured, not_configured_message

            raise LLMNotConfigured(not_configured_message())
        return ScriptedChatModel(role=role or "coder", script=script, relay_tools=relay_tools)

    return load_chat_model


def code_reply(name: str, preface: str = "Here is the kernel.") -> str:
    return f"{preface}\n\n```python\n{(CANDIDATES / name).read_text()}```\n"


def relu_script() -> dict[str, dict[str, str]]:
    """compile error -> wrong -> correct but slow -> fast (the spine's acceptance scenario)."""
    guidance = json.dumps(
        {
            "diagnosis": "scalar -O0 loop",
            "bottleneck": "not-vectorized",
            "steps": ["compile with -O3 and vectorize the loop with omp simd"],
            "extra_metrics": [],
            "stop": False,
        }
    )
    return {
        "coder": {
            "1": code_reply("relu_compile_error.py"),
            "2": "<think>the sign was wrong, try again</think>" + code_reply("relu_wrong.py"),
            "3": code_reply("relu_slow.py"),
            "4": code_reply("relu_fast.py"),
            "5": code_reply("relu_fast.py"),
        },
        "conductor": {
            "1": "The C++ source has a syntax error: fix the missing semicolon.",
            "2": "Negative inputs must map to 0, not 0.1*x.",
            "3": f"```json\n{guidance}\n```",
            "4": f"```json\n{guidance}\n```",
        },
    }
