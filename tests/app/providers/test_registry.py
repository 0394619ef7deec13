"""Resolving ``--model``, environment variables and config to a provider and model."""

from __future__ import annotations

import msgspec
import pytest
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND
from coding_agent.settings.model_config import RegistryError, parse_model_ref
from coding_agent.worker.providers import AnthropicProvider, OpenAIProvider, resolve_model
from pico3.models import (
    DoneEvent,
    FauxProvider,
    ModelCost,
    ModelProvider,
    Request,
    TextContent,
    UserMessage,
    faux_response,
)


def test_no_credentials_means_the_offline_faux_provider() -> None:
    selection = resolve_model(env={})
    assert isinstance(selection.provider, FauxProvider)
    assert selection.ref == "faux/faux-1"


def test_anthropic_key_wins_then_openai() -> None:
    both = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    selection = resolve_model(env=both)
    assert isinstance(selection.provider, AnthropicProvider)
    assert selection.ref == "anthropic/claude-sonnet-4-6"
    assert selection.model.cost == ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)
    openai_only = resolve_model(env={"OPENAI_API_KEY": "o"})
    assert isinstance(openai_only.provider, OpenAIProvider)
    assert isinstance(selection.provider, ModelProvider) and isinstance(
        openai_only.provider, ModelProvider
    )
    assert openai_only.ref == "openai/gpt-4.1"


def test_explicit_model_ref_may_contain_slashes() -> None:
    assert parse_model_ref("openai/meta-llama/Llama-3-8B") == ("openai", "meta-llama/Llama-3-8B")
    selection = resolve_model(
        "openai/meta-llama/Llama-3-8B", env={"OPENAI_BASE_URL": "http://x/v1"}
    )
    assert selection.model.id == "meta-llama/Llama-3-8B"
    assert selection.model.cost is None  # unknown models are unpriced, not free


@pytest.mark.parametrize("ref", ["claude", "/x", "anthropic/", ""])
def test_malformed_refs_are_refused(ref: str) -> None:
    with pytest.raises(RegistryError, match="provider/model-id"):
        parse_model_ref(ref)


def test_missing_key_names_the_variable_to_set() -> None:
    with pytest.raises(RegistryError, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic/claude-haiku-4-5", env={})
    with pytest.raises(RegistryError, match="OPENAI_API_KEY"):
        resolve_model("openai/gpt-4o", env={})
    with pytest.raises(RegistryError, match="unknown provider 'gemini'"):
        resolve_model("gemini/pro", env={})


def test_config_default_model_and_model_overrides() -> None:
    config = {
        "default_model": "openai/qwen3:8b",
        "providers": {
            "openai": {
                "base_url": "http://127.0.0.1:9/v1",
                "compat": {"max_tokens_field": "max_tokens"},
            }
        },
        "models": [
            {
                "provider": "openai",
                "id": "qwen3:8b",
                "context_window": 40960,
                "max_output": 8192,
                "supports_thinking": True,
            }
        ],
    }
    selection = resolve_model(env={}, config=config)
    assert selection.ref == "openai/qwen3:8b"
    assert (selection.model.context_window, selection.model.max_output) == (40960, 8192)
    assert selection.model.supports_thinking
    provider = selection.provider
    assert isinstance(provider, OpenAIProvider)
    assert provider.compat.max_tokens_field == "max_tokens"


def test_bad_config_names_the_path() -> None:
    with pytest.raises(RegistryError, match=r"\$\.providers\.openai"):
        resolve_model(env={}, config={"providers": {"openai": {"apikey": "x"}}})
    with pytest.raises(RegistryError, match=r"\$\.models\[0\]\.provider"):
        resolve_model(env={}, config={"models": [{"provider": "nope", "id": "m"}]})
    with pytest.raises(RegistryError, match=r"unknown provider 'nope' at `\$\.providers`"):
        resolve_model(env={}, config={"providers": {"nope": {}}})


@pytest.mark.anyio
async def test_base_url_from_the_environment_reaches_a_local_server_without_a_key() -> None:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "llama",
        "choices": [{"index": 0, "delta": {"content": "local"}, "finish_reason": "stop"}],
    }
    with StubServer([Reply(events=[sse(chunk), sse("[DONE]")])]) as server:
        selection = resolve_model("openai/llama", env={"OPENAI_BASE_URL": f"{server.url}/v1"})
        provider = selection.provider
        assert isinstance(provider, OpenAIProvider)
        request = Request(model="llama", messages=[UserMessage(content="hi")])
        try:
            events = [e async for e in provider.stream(request, BACKGROUND)]
        finally:
            await provider.aclose()
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.content == [TextContent(text="local")]
    sent = server.requests[0]
    assert sent.headers["authorization"] == "Bearer local"
    assert "max_tokens" in sent.body and "reasoning_effort" not in sent.body


@pytest.mark.anyio
async def test_faux_selection_streams_its_script() -> None:
    selection = resolve_model(
        "faux/demo", env={}, config={"models": [{"provider": "faux", "id": "demo"}]}
    )
    provider = selection.provider
    assert isinstance(provider, FauxProvider)
    provider.append_responses([faux_response("hello")])
    request = Request(model=selection.model.id, messages=[UserMessage(content="x")])
    events = [e async for e in provider.stream(request, BACKGROUND)]
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].message.model == "demo"


def test_a_model_its_provider_does_not_list_is_refused_unless_the_server_hosts_any() -> None:
    """``--model faux/nope`` (issue 38): refused, naming the model and listing the provider's;
    a model added by config or by the faux script is known; an OpenAI-compatible server (a
    preset, a base_url) takes any id, since what it hosts cannot be listed ahead."""
    from coding_agent.settings.model_config import UnknownModel
    from pico3.models import FAUX_MODEL

    with pytest.raises(UnknownModel) as refused:
        resolve_model("faux/nope", env={})
    message = str(refused.value)
    assert message.startswith("unknown model faux/nope; available from faux: faux/faux-1.")
    assert 'provider = "faux", id = "nope"' in message and "--faux-script" in message
    with pytest.raises(UnknownModel, match="available from anthropic: anthropic/claude"):
        resolve_model("anthropic/claude-nope", env={"ANTHROPIC_API_KEY": "k"})
    added = {"models": [{"provider": "anthropic", "id": "claude-nope"}]}
    assert resolve_model("anthropic/claude-nope", env={"ANTHROPIC_API_KEY": "k"}, config=added)
    scripted = msgspec.structs.replace(FAUX_MODEL, id="nope")
    assert resolve_model("faux/nope", env={}, faux_extra=[scripted]).model.id == "nope"
    local = {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    assert resolve_model("openai/anything:7b", env=local).model.id == "anything:7b"
    assert resolve_model("ollama/qwen9:1b", env={}, config={"providers": {"ollama": {}}})
