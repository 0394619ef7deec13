"""``/model`` lists what the configured keys reach: a session's providers are the chosen one,
``faux``, and every other provider whose credentials are set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_agent.worker.providers_facet import resolve_providers


def _names(env: dict[str, str], config: Mapping[str, Any] | None = None, ref: str | None = None) -> list[str]:  # fmt: skip
    choice = resolve_providers(ref, env=env, config=config)
    return [provider.name for provider in choice.providers]


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
    assert [p.name for p in choice.providers] == ["faux", "groq"]
    assert choice.ref == "groq/llama-3.3-70b-versatile"
