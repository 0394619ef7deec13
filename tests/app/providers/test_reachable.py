"""``/model`` lists what the configured keys reach: a session's providers are the chosen one,
``faux``, and every other provider whose credentials are set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from coding_agent.worker.providers_facet import UnconfiguredProvider, resolve_providers
from pico3.models import ErrorEvent, Request

pytestmark = pytest.mark.anyio


def _names(env: dict[str, str], config: Mapping[str, Any] | None = None, ref: str | None = None) -> list[str]:  # fmt: skip
    choice = resolve_providers(ref, env=env, config=config)
    return [p.name for p in choice.providers if not isinstance(p, UnconfiguredProvider)]


def test_every_provider_with_credentials_joins_the_chosen_one() -> None:
    env = {"ANTHROPIC_API_KEY": "a", "GEMINI_API_KEY": "g", "GROQ_API_KEY": "q",
           "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}  # fmt: skip
    assert _names(env, ref="google/gemini-2.5-pro") == [
        "faux",
        "google",
        "anthropic",
        "bedrock",
        "groq",
    ]
    # a local preset counts once configured; openai's key reaches both OpenAI APIs
    config = {"providers": {"ollama": {"base_url": "http://127.0.0.1:11434/v1"}}}
    names = _names({"OPENAI_API_KEY": "o"}, config)
    assert names == ["faux", "openai", "openai-responses", "ollama"]


def test_without_credentials_only_the_chosen_provider_and_faux() -> None:
    assert _names({}) == ["faux"]
    assert _names({"AWS_REGION": "us-east-1"}) == ["faux"]  # a region is no credential
    choice = resolve_providers("groq/llama-3.3-70b-versatile", env={"GROQ_API_KEY": "q"})
    assert [p.name for p in choice.providers][:2] == ["faux", "groq"]
    assert choice.ref == "groq/llama-3.3-70b-versatile"


async def test_a_provider_without_credentials_says_which_key_it_needs() -> None:
    choice = resolve_providers(None, env={"GROQ_API_KEY": "q"})
    assert "groq" not in choice.unreachable and "faux" not in choice.unreachable
    assert choice.unreachable["anthropic"].startswith(
        "anthropic needs an API key: set ANTHROPIC_API_KEY"
    )
    assert "set GEMINI_API_KEY (or GOOGLE_API_KEY)" in choice.unreachable["google"]
    assert "set AWS_REGION" in choice.unreachable["bedrock"]
    assert "add a [providers.ollama] table" in choice.unreachable["ollama"]
    stand_in = next(p for p in choice.providers if p.name == "anthropic")
    assert isinstance(stand_in, UnconfiguredProvider) and stand_in.models() == ()
    request = Request(model="claude-sonnet-4-6", messages=[])
    events = [event async for event in stand_in.stream(request, None)]
    last = events[-1]
    assert isinstance(last, ErrorEvent) and not last.retryable
    assert "set ANTHROPIC_API_KEY" in (last.error.error_message or "")
