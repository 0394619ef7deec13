"""OpenAI-compatible services and local servers by name: ``--model groq/llama-3.3-70b-versatile``.

Each preset is the Chat Completions adapter (:class:`~.openai.OpenAIProvider`) with the
service's base URL, the variable holding its key, and its quirks set in an
:class:`~.openai.OpenAICompat` profile, so that nothing needs configuring but the key. All of
it is the one table below (:data:`PRESETS`); ``[providers.NAME]`` in config.toml overrides any
part (``base_url``, ``api_key``/``api_key_env``, ``[providers.NAME.compat]``), and
``[[models]]`` entries with ``provider = "NAME"`` give models their limits and prices (a preset
model not listed is unpriced).

The quirks, by column:

* ``max_tokens``: the output-limit field the service takes (``max_completion_tokens`` is
  OpenAI's newer name; most others still read ``max_tokens``);
* ``usage``: whether to send ``stream_options.include_usage`` (a service that rejects unknown
  fields refuses it; one that sends usage anyway needs no asking: the adapter reads usage from
  any chunk that carries it);
* ``effort``: whether ``reasoning_effort`` is sent for thinking levels (only where every model
  takes OpenAI's levels);
* ``thinking``: the delta field that carries the model's reasoning (``reasoning_content`` or
  ``reasoning``; the adapter reads both, the column documents which one to expect);
* ``tools``: ``native`` tool calls; local servers whose model may lack a tool-calling template
  refuse tools with an error, and the adapter then switches that model to ``text`` tool calls
  by itself (see :mod:`.text_tools`).
"""

from __future__ import annotations

import msgspec

from coding_agent.worker.providers.openai import OpenAICompat

__all__ = ["PRESETS", "Preset"]


class Preset(msgspec.Struct, frozen=True):
    """An OpenAI-compatible service: where it is, which variable holds its key (``None``: a
    local server needing none), what it supports, and which delta field carries reasoning."""

    name: str
    base_url: str
    key_variable: str | None
    compat: OpenAICompat
    thinking_field: str


def _compat(*, max_tokens: str, usage: bool, effort: bool) -> OpenAICompat:
    return OpenAICompat(
        max_tokens_field=max_tokens,  # pyright: ignore[reportArgumentType]
        usage_in_streaming=usage,
        reasoning_effort=effort,
    )


# name          base URL                                   key variable          max_tokens field        usage  effort thinking field
_TABLE: tuple[tuple[str, str, str | None, str, bool, bool, str], ...] = (
    ("openrouter", "https://openrouter.ai/api/v1",            "OPENROUTER_API_KEY", "max_tokens",            True,  False, "reasoning"),
    ("groq",       "https://api.groq.com/openai/v1",          "GROQ_API_KEY",       "max_completion_tokens", True,  False, "reasoning"),
    ("deepseek",   "https://api.deepseek.com/v1",             "DEEPSEEK_API_KEY",   "max_tokens",            True,  False, "reasoning_content"),
    ("mistral",    "https://api.mistral.ai/v1",               "MISTRAL_API_KEY",    "max_tokens",            False, False, "reasoning_content"),
    ("ollama",     "http://127.0.0.1:11434/v1",               None,                 "max_tokens",            True,  False, "reasoning"),
    ("lmstudio",   "http://127.0.0.1:1234/v1",                None,                 "max_tokens",            True,  False, "reasoning_content"),
    ("vllm",       "http://127.0.0.1:8000/v1",                None,                 "max_tokens",            True,  False, "reasoning_content"),
    ("llamacpp",   "http://127.0.0.1:8080/v1",                None,                 "max_tokens",            True,  False, "reasoning_content"),
)  # fmt: skip

PRESETS: dict[str, Preset] = {
    name: Preset(
        name=name,
        base_url=url,
        key_variable=key,
        compat=_compat(max_tokens=field, usage=usage, effort=effort),
        thinking_field=thinking,
    )
    for name, url, key, field, usage, effort, thinking in _TABLE
}
"""The presets by name (the table above)."""
