"""The single LLM seam. Every chat model PRAGMA uses comes from ``load_chat_model``.

Tests replace this one symbol with a scripted model (nodes call it as ``llm.load_chat_model``).
Endpoint settings come from the environment, most specific first:
``PRAGMA_<ROLE>_BASE_URL`` > ``PRAGMA_LLM_BASE_URL`` > ``OPENAI_BASE_URL`` (and ``..._API_KEY`` likewise).
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

SUPPORTED_PROVIDERS = ("openai",)


class LLMError(Exception):
    """A user-facing, one-line problem with the LLM configuration or endpoint."""


class LLMNotConfigured(LLMError):
    pass


def not_configured_message() -> str:
    return ("no LLM configured: set PRAGMA_CODER_MODEL=openai:MODEL with PRAGMA_LLM_BASE_URL and "
            "PRAGMA_LLM_API_KEY (any OpenAI-compatible endpoint), or pass --coder-model; see README")


def _setting(role: str, name: str) -> str | None:
    keys = ([f"PRAGMA_{role.upper()}_{name}"] if role else []) + [f"PRAGMA_LLM_{name}", f"OPENAI_{name}"]
    return next((os.environ[k] for k in keys if os.environ.get(k)), None)


def load_chat_model(spec: str, *, role: str = "", timeout_s: float = 600.0) -> BaseChatModel:
    """Return the chat model named by ``spec`` ('provider:model')."""
    if not spec:
        raise LLMNotConfigured(not_configured_message())
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise LLMError(f"model spec {spec!r} must look like 'provider:model', e.g. 'openai:deepseek-r1'")
    if provider not in SUPPORTED_PROVIDERS:
        raise LLMError(f"unknown provider {provider!r} in {spec!r}; supported: {', '.join(SUPPORTED_PROVIDERS)}")
    from langchain_openai import ChatOpenAI

    base_url = _setting(role, "BASE_URL")
    # Self-hosted servers (vLLM, Ollama, llama.cpp) accept any key; hosted APIs need a real one.
    api_key = _setting(role, "API_KEY") or ("not-needed" if base_url else None)
    if api_key is None:
        raise LLMNotConfigured(f"no API key for {spec!r}: set PRAGMA_LLM_API_KEY (or PRAGMA_LLM_BASE_URL "
                               "for a self-hosted endpoint)")
    return ChatOpenAI(model=model, base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=2)


def usage_of(message: BaseMessage, role: str) -> dict[str, float]:
    meta: dict[str, Any] = getattr(message, "usage_metadata", None) or {}
    return {
        "input_tokens": float(meta.get("input_tokens", 0)),
        "output_tokens": float(meta.get("output_tokens", 0)),
        "llm_calls": 1.0,
        f"{role}_calls": 1.0,
    }
