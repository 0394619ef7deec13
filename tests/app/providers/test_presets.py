"""OpenAI-compatible presets by name: each resolves to the Chat Completions adapter with its
service's URL, key variable and quirks; a stub server checks what reaches the wire."""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import READ, collect
from stub_server import Reply, StubServer, sse

from coding_agent.settings.model_config import PRESETS, key_variables
from coding_agent.worker.providers.openai import OpenAIProvider
from coding_agent.worker.providers.registry import resolve_model
from pico3.models import (
    DoneEvent,
    Request,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return sse({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": choices, **extra})  # fmt: skip


def _answer(thinking_field: str, *, usage_in_last: bool = False) -> list[str]:
    """Reasoning in ``thinking_field``, then a tool call; usage in its own chunk or the last."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "read", "arguments": '{"path": "a.txt"}'}}  # fmt: skip
    events = [
        _chunk({"role": "assistant", thinking_field: "Need a.txt."}),
        _chunk({"tool_calls": [call]}),
    ]
    if usage_in_last:
        return [*events, _chunk({}, "tool_calls", usage=usage), sse("[DONE]")]
    return [*events, _chunk({}, "tool_calls"), _chunk(None, usage=usage), sse("[DONE]")]


def _config(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"providers": {name: {"base_url": url, **extra}}}


def test_every_preset_resolves_to_its_url_key_and_quirks() -> None:
    for name, preset in PRESETS.items():
        env = {preset.key_variable: "k"} if preset.key_variable else {}
        selection = resolve_model(f"{name}/some/model", env=env)
        provider = selection.provider
        assert isinstance(provider, OpenAIProvider)
        assert provider.name == name and selection.ref == f"{name}/some/model"
        assert provider.compat == preset.compat
        assert provider._client_options["base_url"] == preset.base_url  # pyright: ignore[reportPrivateUsage]
        assert provider._client_options["api_key"] == ("k" if preset.key_variable else "local")  # pyright: ignore[reportPrivateUsage]
        if preset.key_variable:
            with pytest.raises(
                ValueError, match=f"{name} needs an API key: set {preset.key_variable}"
            ):
                resolve_model(f"{name}/x", env={})
            assert preset.key_variable in key_variables()
    assert PRESETS["deepseek"].thinking_field == "reasoning_content"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "field", "limit", "usage_asked", "usage_in_last"),
    [
        ("groq", "reasoning", "max_completion_tokens", True, False),
        ("deepseek", "reasoning_content", "max_tokens", True, False),
        ("mistral", "reasoning_content", "max_tokens", False, True),
        ("openrouter", "reasoning", "max_tokens", True, False),
    ],
)
async def test_a_preset_streams_reasoning_and_a_tool_call_with_its_quirks(
    name: str, field: str, limit: str, usage_asked: bool, usage_in_last: bool
) -> None:
    preset = PRESETS[name]
    assert preset.thinking_field == field
    reply = Reply(events=_answer(field, usage_in_last=usage_in_last))
    with StubServer([reply]) as server:
        selection = resolve_model(
            f"{name}/vendor/model-1",
            env={preset.key_variable or "": "secret-key"},
            config=_config(name, f"{server.url}/v1"),
        )
        request = Request(
            model="vendor/model-1", messages=[UserMessage(content="hi")], tools=[READ],
            thinking_level="high",
        )  # fmt: skip
        events = await collect(selection.provider, request)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert done.message.provider == name
    assert done.message.content == [
        ThinkingContent(thinking="Need a.txt."),
        ToolCall(id="call_1", name="read", arguments={"path": "a.txt"}),
    ]
    assert done.message.usage is not None and done.message.usage.output == 20
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer secret-key"
    body = sent.body
    assert body["model"] == "vendor/model-1" and limit in body
    assert ("stream_options" in body) is usage_asked
    assert "reasoning_effort" not in body
    assert body["tools"][0]["function"]["name"] == "read"


@pytest.mark.anyio
async def test_config_compat_keys_replace_only_theirs_and_a_local_server_needs_no_key() -> None:
    answer = [_chunk({"role": "assistant", "content": "ok"}), _chunk({}, "stop"), sse("[DONE]")]
    with StubServer([Reply(events=answer)]) as server:
        config = _config("ollama", f"{server.url}/v1", compat={"usage_in_streaming": False})
        selection = resolve_model("ollama/qwen3:8b", env={}, config=config)
        provider = selection.provider
        assert isinstance(provider, OpenAIProvider)
        assert provider.compat.max_tokens_field == "max_tokens"  # the preset's, kept
        assert provider.compat.usage_in_streaming is False  # the config's
        events = await collect(
            provider, Request(model="qwen3:8b", messages=[UserMessage(content="hi")])
        )
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.content == [TextContent(text="ok")]
    sent = server.requests[0]
    assert sent.headers["authorization"] == "Bearer local"
    assert "stream_options" not in sent.body and "max_tokens" in sent.body


def test_models_entries_price_a_preset_model_and_set_its_tool_calling() -> None:
    config = {
        "models": [
            {"provider": "openrouter", "id": "anthropic/claude-sonnet-4.5", "context_window": 200000,
             "max_output": 64000, "supports_images": True, "cost": {"input": 3, "output": 15}},
            {"provider": "lmstudio", "id": "gemma-3-4b", "tool_calling": "text"},
        ]
    }  # fmt: skip
    selection = resolve_model(
        "openrouter/anthropic/claude-sonnet-4.5", env={"OPENROUTER_API_KEY": "k"}, config=config
    )
    assert selection.model.cost is not None and selection.model.cost.output == 15
    assert selection.model.supports_images and selection.model.provider == "openrouter"
    local = resolve_model("lmstudio/gemma-3-4b", env={}, config=config).provider
    assert isinstance(local, OpenAIProvider) and local.tool_calling("gemma-3-4b") == "text"
