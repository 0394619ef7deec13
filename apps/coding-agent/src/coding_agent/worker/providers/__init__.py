"""Model providers for the coding agent: real SDK adapters plus the registry that picks one.

* :mod:`~coding_agent.worker.providers.anthropic` — Anthropic Messages API (``anthropic`` SDK).
* :mod:`~coding_agent.worker.providers.openai` — Chat Completions (``openai`` SDK), which also
  covers OpenAI-compatible servers (Ollama, llama.cpp, vLLM) through ``base_url``.
* :mod:`~coding_agent.worker.providers.openai_responses` — the Responses API (``openai`` SDK):
  reasoning items replayed encrypted across turns (``store=false``).
* :mod:`~coding_agent.worker.providers.google` — Gemini (``google-genai``): thought summaries,
  thought signatures replayed, function calling, images.
* :mod:`~coding_agent.worker.providers.cloud` — Claude on Bedrock and Vertex (the Anthropic
  SDK's cloud clients, the Anthropic mapping).
* :mod:`~coding_agent.worker.providers.registry` — ``--model provider/id``, environment
  variables and config to a :class:`ModelSelection`; ``faux`` when nothing is configured.

All of them implement :class:`pico3.models.ModelProvider`, and stream the same events. The SDK
adapters are built on one streaming core (:mod:`~coding_agent.worker.providers._core`): an
adapter is its wire mapping (request body, event mapping, error mapping) and the core owns the
SDK client, the SSE stream, retries, cancellation, usage pricing and the message memo.
"""

from __future__ import annotations

from coding_agent.settings.model_config import (
    LOCAL_COMPAT,
    OPENAI_COMPAT,
    OpenAICompat,
    RegistryError,
    parse_model_ref,
)
from coding_agent.worker.providers._sdk_import import preload_sdk_clients
from coding_agent.worker.providers._tls import preload_tls_context, preloaded_tls_sources
from coding_agent.worker.providers.anthropic import ANTHROPIC_MODELS, AnthropicProvider
from coding_agent.worker.providers.openai import OPENAI_MODELS, OpenAIProvider
from coding_agent.worker.providers.registry import ModelSelection, resolve_model

__all__ = [
    "ANTHROPIC_MODELS",
    "LOCAL_COMPAT",
    "OPENAI_COMPAT",
    "OPENAI_MODELS",
    "AnthropicProvider",
    "ModelSelection",
    "OpenAICompat",
    "OpenAIProvider",
    "RegistryError",
    "parse_model_ref",
    "preload_sdk_clients",
    "preload_tls_context",
    "preloaded_tls_sources",
    "resolve_model",
]
