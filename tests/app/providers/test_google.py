"""The Gemini adapter, with the real ``google-genai`` SDK talking to a local stub server that
speaks ``streamGenerateContent?alt=sse``."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from provider_support import PNG, READ, Sleeps, ask, collect_each
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND
from coding_agent.settings.model_config import key_variables
from coding_agent.worker.providers.google import GoogleProvider
from coding_agent.worker.providers.registry import resolve_model
from pico3.models import (
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Request,
    RetryPolicy,
    TextContent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_to_json,
    messages_from_json,
    reduce_events,
)

SIGNATURE = b"\x01gemini-thought-signature\xff"


def _chunk(*parts: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> str:  # fmt: skip
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-pro"}
    if usage is not None:
        body["usageMetadata"] = usage
    return sse(body)


USAGE = {"promptTokenCount": 1000, "candidatesTokenCount": 30, "thoughtsTokenCount": 20,
         "cachedContentTokenCount": 400, "totalTokenCount": 1050}  # fmt: skip


def _camel(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with snake_case keys spelt lowerCamelCase (one level)."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        head, *rest = key.split("_")
        out[head + "".join(word.title() for word in rest)] = value
    return out


def _provider(server: StubServer, sleeps: Sleeps | None = None) -> GoogleProvider:
    return GoogleProvider(
        api_key="gemini-key",
        base_url=server.url,
        sleep=sleeps or Sleeps(),
        retry=RetryPolicy(max_retries=2, base_delay=1.0, jitter=0.0),
    )


@pytest.mark.anyio
async def test_thoughts_text_and_a_function_call_stream_and_the_signature_is_replayed() -> None:
    signature = base64.b64encode(SIGNATURE).decode()
    first = [
        _chunk({"text": "Need the file. ", "thought": True}),
        _chunk({"text": "Reading it.", "thought": True}),
        _chunk({"text": "Let me look."}),
        _chunk({"functionCall": {"name": "read", "args": {"path": "a.txt"}},
                "thoughtSignature": signature}, finish="STOP", usage=USAGE),
    ]  # fmt: skip
    second = [_chunk({"text": "It says hi."}, finish="STOP", usage=USAGE)]
    user = UserMessage(content="what is in a.txt?")
    with StubServer([Reply(events=first), Reply(events=second)]) as server:
        provider = _provider(server)
        try:
            request = Request(
                model="gemini-2.5-pro", messages=[user], tools=[READ], system=["be brief"],
                thinking_level="low",
            )  # fmt: skip
            events = [e async for e in provider.stream(request, BACKGROUND)]
            answer = events[-1]
            assert isinstance(answer, DoneEvent)
            [stored] = messages_from_json([message_to_json(answer.message)])  # a resumed session
            [call] = [b for b in stored.content if isinstance(b, ToolCall)]
            result = ToolResultMessage(
                tool_call_id=call.id, tool_name="read", content=[TextContent(text="hi")]
            )
            follow = Request(model="gemini-2.5-pro", messages=[user, stored, result], tools=[READ])
            later = [e async for e in provider.stream(follow, BACKGROUND)]
        finally:
            await provider.aclose()
    assert answer.reason == "toolUse"
    thinking = "".join(e.delta for e in events if isinstance(e, ThinkingDeltaEvent))
    assert thinking == "Need the file. Reading it."
    content = answer.message.content
    assert content[:3] == [
        ThinkingContent(thinking="Need the file. Reading it."),
        TextContent(text="Let me look."),
        ThinkingContent(thinking="", signature=signature),
    ]
    assert isinstance(content[3], ToolCall) and content[3].name == "read"
    assert content[3].arguments == {"path": "a.txt"}
    assert reduce_events(events) == answer.message
    usage = answer.message.usage
    assert usage is not None and (usage.input, usage.output, usage.cache_read) == (600, 50, 400)
    assert usage.cost.total == pytest.approx((600 * 1.25 + 50 * 10 + 400 * 0.31) / 1e6)
    assert isinstance(later[-1], DoneEvent) and later[-1].reason == "stop"

    sent = server.requests[0]
    assert sent.path.endswith("/models/gemini-2.5-pro:streamGenerateContent?alt=sse")  # v1(beta)
    assert sent.headers["x-goog-api-key"] == "gemini-key"
    body = sent.body
    assert body["systemInstruction"]["parts"] == [{"text": "be brief"}]
    # (proto JSON takes either spelling; the SDK leaves some nested keys in snake_case)
    assert _camel(body["generationConfig"]["thinkingConfig"]) == {
        "includeThoughts": True, "thinkingBudget": 4096
    }  # fmt: skip
    [declaration] = body["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "read"
    assert _camel(declaration)["parametersJsonSchema"] == READ.parameters
    replayed = server.requests[1].body["contents"]
    assert replayed[1] == {
        "role": "model",
        "parts": [
            {"text": "Need the file. Reading it.", "thought": True},
            {"text": "Let me look."},
            {"functionCall": {"name": "read", "args": {"path": "a.txt"}},
             "thoughtSignature": signature},
        ],
    }  # fmt: skip
    assert replayed[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "read", "response": {"output": "hi"}}}],
    }


@pytest.mark.anyio
async def test_images_are_inline_data_in_user_turns_and_after_tool_results() -> None:
    messages = [
        UserMessage(content=[TextContent(text="what is this?"), ImageContent(PNG, "image/png")]),
        AssistantMessage(
            content=[ToolCall(id="c1", name="shot", arguments={})], api="google-generative-ai"
        ),
        ToolResultMessage(
            tool_call_id="c1", tool_name="shot",
            content=[TextContent(text="screen"), ImageContent(PNG, "image/jpeg")],
        ),
    ]  # fmt: skip
    with StubServer([Reply(events=[_chunk({"text": "A cat."}, finish="STOP")])]) as server:
        [events] = await collect_each(
            _provider(server), Request(model="gemini-2.5-flash", messages=messages)
        )
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.content == [TextContent(text="A cat.")]
    contents = server.requests[0].body["contents"]
    assert _camel(contents[0]["parts"][1]["inlineData"]) == {"mimeType": "image/png", "data": PNG}
    response, image = contents[2]["parts"]
    assert response == {"functionResponse": {"name": "shot", "response": {"output": "screen"}}}
    assert _camel(image["inlineData"]) == {"mimeType": "image/jpeg", "data": PNG}


@pytest.mark.anyio
async def test_429_honours_retry_after_and_a_400_is_one_line() -> None:
    limited = Reply(429, {"retry-after": "6"}, {"error": {"code": 429, "message":
                    "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}})  # fmt: skip
    bad = Reply(400, json_body={"error": {"code": 400, "message": "API key not valid.",
                                          "status": "INVALID_ARGUMENT"}})  # fmt: skip
    sleeps = Sleeps()
    with StubServer([limited, bad]) as server:
        [events] = await collect_each(
            _provider(server, sleeps), Request(model="gemini-2.5-pro", messages=[UserMessage(content="hi")])
        )  # fmt: skip
    assert sleeps.waits == [6.0] and len(server.requests) == 2
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert error.error.error_message == "google 400 INVALID_ARGUMENT: API key not valid."


@pytest.mark.anyio
async def test_a_blocked_answer_and_a_truncated_one() -> None:
    blocked = [_chunk({"text": "Sure"}, finish="SAFETY")]
    truncated = [_chunk({"text": "long"}, finish="MAX_TOKENS")]
    request = Request(model="gemini-2.5-pro", messages=[UserMessage(content="hi")])
    with StubServer([Reply(events=blocked), Reply(events=truncated)]) as server:
        blocked_events, truncated_events = await collect_each(_provider(server), request, request)
    error = blocked_events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert error.error.error_message == "google: the answer was blocked (SAFETY)"
    done = truncated_events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "length"


def test_the_registry_takes_gemini_or_google_api_key() -> None:
    for variable in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        selection = resolve_model("google/gemini-2.5-flash", env={variable: "k"})
        assert isinstance(selection.provider, GoogleProvider)
        assert selection.model.cost is not None
    with pytest.raises(ValueError, match="google needs an API key: set GEMINI_API_KEY"):
        resolve_model("google/gemini-2.5-pro", env={})
    assert {"GEMINI_API_KEY", "GOOGLE_API_KEY"} <= set(key_variables())


def test_a_headless_run_on_gemini(agent_env: dict[str, str], tmp_path: Path) -> None:
    """The real binary imports google-genai at the first request and prints the answer."""
    answer = [_chunk({"text": "Hello "}), _chunk({"text": "there."}, finish="STOP", usage=USAGE)]
    with StubServer([Reply(events=answer)]) as server:
        env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config"),
               "GEMINI_API_KEY": "gemini-key", "GOOGLE_GEMINI_BASE_URL": server.url}  # fmt: skip
        done = ask("google/gemini-2.5-flash", tmp_path, env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello there.\n", "")
    assert server.requests[0].headers["x-goog-api-key"] == "gemini-key"
