"""Prompt budgets: keep one prompt inside what the model can read.

Why: the embedded model's server has a small context (``local_model.CONTEXT_TOKENS``); a prompt
that overflows it is cut by the server from the front (the instructions go first) or refused. The
budget is approximate on purpose (no tokenizer for every model): code and XML-ish prompts run
about 3 characters per token with Qwen/Llama BPE vocabularies, so 3.0 errs on the safe side.
Sections (``<tag ...>content</tag>``) are trimmed least important first; the instructions, the
signature and the repair hints are never trimmed.
"""

from __future__ import annotations

import math
import re

CHARS_PER_TOKEN = 3.0
# Room left for the reply in the local model's context (a kernel is 300-800 tokens).
REPLY_RESERVE_TOKENS = 1200
OMITTED = "(omitted to fit the model's context)"
# Least important first. Dropped whole: context the model can do without.
DROP_ORDER = ("hardware", "inputs", "history", "profiler_knowledge", "verified_kernels", "log_tail")
# Then shortened (head and tail kept): what the model needs but can read in part.
SHORTEN_ORDER = (
    "guidance",
    "repair_instructions",
    "historical_best",
    "failed_candidate",
    "previous_candidate",
    "problem",
    "verifier",
)


def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def budget_for(ctx_budget_tokens: int, is_local: bool) -> int:
    """The prompt budget in tokens: the knob when set, else the local model's context minus the
    reply's room, else 0 (no limit)."""
    if ctx_budget_tokens > 0:
        return ctx_budget_tokens
    if is_local:
        from pragma.nodes import local_model

        return max(1024, local_model.CONTEXT_TOKENS - REPLY_RESERVE_TOKENS)
    return 0


def _section(tag: str) -> re.Pattern[str]:
    return re.compile(rf"(<{tag}(?:\s[^>]*)?>)(.*?)(</{tag}>)", re.DOTALL)


def fit(system: str, human: str, budget_tokens: int) -> str:
    """``human`` trimmed so that system + human stay within ``budget_tokens`` (0: unchanged)."""
    if budget_tokens <= 0 or approx_tokens(system + human) <= budget_tokens:
        return human
    for tag in DROP_ORDER:
        human = _section(tag).sub(lambda m: f"{m.group(1)}{OMITTED}{m.group(3)}", human)
        if approx_tokens(system + human) <= budget_tokens:
            return human
    for tag in SHORTEN_ORDER:
        excess = (approx_tokens(system + human) - budget_tokens) * CHARS_PER_TOKEN
        if excess <= 0:
            return human
        cut = int(excess) + 200
        human = _section(tag).sub(
            lambda m, cut=cut: m.group(1) + _shorten(m.group(2), cut) + m.group(3), human, count=1
        )
    return human


def _shorten(content: str, remove_chars: int) -> str:
    """Drop ``remove_chars`` from the middle (the start and the end say the most: a problem's class
    and get_inputs, a log's first and last errors)."""
    keep = max(0, len(content) - remove_chars - 60)
    if keep >= len(content):
        return content
    head = keep * 2 // 3
    tail = keep - head
    return f"{content[:head]}\n...[{len(content) - keep} characters omitted to fit the model's context]...\n" + (
        content[len(content) - tail :] if tail else ""
    )
