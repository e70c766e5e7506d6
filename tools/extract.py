"""Pull the candidate module out of an LLM reply.

Models wrap code in fenced blocks, sometimes several (an explanation snippet, then the module),
and reasoning models prefix a ``<think>`` section. We drop reasoning, prefer the last python
block that defines ``ModelNew`` (the last one may lack its closing fence), and fall back to the whole reply when it already parses.
"""

from __future__ import annotations

import ast
import re

# The closing fence may be missing at the very end (a reply cut at max_tokens, or a model that
# forgot it): the block then runs to the end of the reply, and is verified like any code.
FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


class ExtractionError(ValueError):
    """The reply holds no usable ModelNew module."""


def strip_reasoning(text: str) -> str:
    return THINK.sub("", text).strip()


def extract_code(reply: str) -> str:
    text = strip_reasoning(reply)
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(text)]
    with_model = [body for lang, body in blocks if "ModelNew" in body and lang in ("", "python", "py")]
    if with_model:
        return with_model[-1].strip() + "\n"
    if "ModelNew" in text:
        try:
            ast.parse(text)
            return text.strip() + "\n"
        except SyntaxError:
            pass
    raise ExtractionError("the reply contains no Python code block defining ModelNew")
