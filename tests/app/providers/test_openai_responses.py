"""The OpenAI Responses adapter, with the real ``openai`` SDK talking to a local stub server that
speaks the Responses SSE protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from provider_support import PNG, READ, Sleeps, ask, collect_each
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND
from coding_agent.settings.model_config import key_variables
from coding_agent.worker.providers.openai_responses import OpenAIResponsesProvider
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

ENCRYPTED = "gAAAAB-encrypted-reasoning-blob=="


def _event(kind: str, **fields: Any) -> str:
    return sse({"type": kind, "sequence_number": 0, **fields}, event=kind)


def _completed(input: int = 100, output: int = 20, cached: int = 0) -> str:
    usage = {
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    }
    return _event(
        "response.completed", response={"id": "resp_1", "status": "completed", "usage": usage}
    )


def _text_item(index: int, *parts: str) -> list[str]:
    item = {"type": "message", "id": f"msg_{index}", "role": "assistant", "content": []}
    return [
        _event("response.output_item.added", output_index=index, item=item),
        *(
            _event("response.output_text.delta", output_index=index, item_id=f"msg_{index}",
                   content_index=0, delta=p)
            for p in parts
        ),
        _event("response.output_item.done", output_index=index, item=item),
    ]  # fmt: skip


def _call_item(index: int, call_id: str, name: str, *fragments: str) -> list[str]:
    item = {"type": "function_call", "id": f"fc_{index}", "call_id": call_id, "name": name,
            "arguments": ""}  # fmt: skip
    done = {**item, "arguments": "".join(fragments)}
    return [
        _event("response.output_item.added", output_index=index, item=item),
        *(
            _event("response.function_call_arguments.delta", output_index=index,
                   item_id=f"fc_{index}", delta=f)
            for f in fragments
        ),
        _event("response.output_item.done", output_index=index, item=done),
    ]  # fmt: skip


def _reasoning_item(index: int, *summaries: str) -> list[str]:
    item = {"type": "reasoning", "id": f"rs_{index}", "summary": []}
    out = [_event("response.output_item.added", output_index=index, item=item)]
    for number, summary in enumerate(summaries):
        out.append(
            _event("response.reasoning_summary_part.added", output_index=index,
                   item_id=f"rs_{index}", summary_index=number,
                   part={"type": "summary_text", "text": ""})
        )  # fmt: skip
        out.append(
            _event("response.reasoning_summary_text.delta", output_index=index,
                   item_id=f"rs_{index}", summary_index=number, delta=summary)
        )  # fmt: skip
    done = {
        **item,
        "summary": [{"type": "summary_text", "text": s} for s in summaries],
        "encrypted_content": ENCRYPTED,
    }
    out.append(_event("response.output_item.done", output_index=index, item=done))
    return out


def _provider(server: StubServer, sleeps: Sleeps | None = None) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(
        api_key="test-key",
        base_url=f"{server.url}/v1",
        sleep=sleeps or Sleeps(),
        retry=RetryPolicy(max_retries=2, base_delay=1.0, jitter=0.0),
    )


@pytest.mark.anyio
async def test_a_streamed_answer_with_a_tool_call_and_its_usage_and_cost() -> None:
    script = [
        *_text_item(0, "Let me ", "look."),
        *_call_item(1, "call_abc", "read", '{"pa', 'th": "a.txt"}'),
        _completed(input=1000, output=50, cached=400),
    ]
    request = Request(
        model="gpt-4.1", messages=[UserMessage(content="read a.txt")], system=["a", "b"],
        tools=[READ],
    )  # fmt: skip
    with StubServer([Reply(events=script)]) as server:
        [events] = await collect_each(_provider(server), request)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert done.message.content == [
        TextContent(text="Let me look."),
        ToolCall(id="call_abc", name="read", arguments={"path": "a.txt"}),
    ]
    assert done.message.provider == "openai-responses" and done.message.api == "openai-responses"
    usage = done.message.usage
    assert usage is not None and (usage.input, usage.output, usage.cache_read) == (600, 50, 400)
    assert usage.cost.total == pytest.approx((600 * 2 + 50 * 8 + 400 * 0.5) / 1e6)
    assert reduce_events(events) == done.message
    sent = server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer test-key"
    body = sent.body
    assert body["stream"] is True and body["store"] is False
    assert body["instructions"] == "a\n\nb"
    assert body["input"] == [{"role": "user", "content": "read a.txt"}]
    assert body["tools"] == [
        {"type": "function", "name": "read", "description": "Read a file",
         "parameters": READ.parameters, "strict": False}
    ]  # fmt: skip
    assert body["max_output_tokens"] == 32_768
    assert "include" not in body and "reasoning" not in body  # gpt-4.1 does not reason


@pytest.mark.anyio
async def test_reasoning_is_shown_as_thinking_and_replayed_encrypted_on_the_next_request() -> None:
    first = [
        *_reasoning_item(0, "Need the file.", "Reading it."),
        *_call_item(1, "call_1", "read", '{"path": "a.txt"}'),
        _completed(),
    ]
    second = [*_text_item(0, "It says hi."), _completed()]
    user = UserMessage(content="what is in a.txt?")
    with StubServer([Reply(events=first), Reply(events=second)]) as server:
        provider = _provider(server)
        try:
            request = Request(model="gpt-5", messages=[user], tools=[READ], thinking_level="high")
            events = [e async for e in provider.stream(request, BACKGROUND)]
            answer = events[-1]
            assert isinstance(answer, DoneEvent)
            # A resumed session replays what was stored: round-trip the answer through JSON.
            [stored] = messages_from_json([message_to_json(answer.message)])
            result = ToolResultMessage(
                tool_call_id="call_1", tool_name="read", content=[TextContent(text="hi")]
            )
            follow = Request(
                model="gpt-5", messages=[user, stored, result], tools=[READ], thinking_level="high"
            )
            later = [e async for e in provider.stream(follow, BACKGROUND)]
        finally:
            await provider.aclose()
    thinking = [e.delta for e in events if isinstance(e, ThinkingDeltaEvent)]
    assert "".join(thinking) == "Need the file.\n\nReading it."
    assert answer.message.content[0] == ThinkingContent(
        thinking="Need the file.\n\nReading it.", signature=ENCRYPTED
    )
    assert isinstance(later[-1], DoneEvent) and later[-1].reason == "stop"
    body = server.requests[0].body
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    replayed = server.requests[1].body["input"]
    assert replayed == [
        {"role": "user", "content": "what is in a.txt?"},
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Need the file.\n\nReading it."}],
            "encrypted_content": ENCRYPTED,
        },
        {"type": "function_call", "call_id": "call_1", "name": "read",
         "arguments": '{"path":"a.txt"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "hi"},
    ]  # fmt: skip
    assert server.requests[1].body["store"] is False


def test_another_apis_thinking_is_not_replayed_as_reasoning() -> None:
    from coding_agent.worker.providers.openai_responses import build_params

    signed = AssistantMessage(
        content=[
            ThinkingContent(thinking="hmm", signature="anthropic-sig"),
            TextContent(text="ok"),
        ],
        api="anthropic-messages",
    )
    provider = OpenAIResponsesProvider(api_key="k")
    info = provider.model("gpt-5")
    body = build_params(Request(model="gpt-5", messages=[UserMessage(content="q"), signed]), info)
    assert body["input"][1:] == [{"role": "assistant", "content": "ok"}]


@pytest.mark.anyio
async def test_images_go_as_input_image_parts_in_user_messages_and_tool_results() -> None:
    messages = [
        UserMessage(content=[TextContent(text="what is this?"), ImageContent(PNG, "image/png")]),
        AssistantMessage(
            content=[ToolCall(id="call_s", name="shot", arguments={})], api="openai-responses"
        ),
        ToolResultMessage(
            tool_call_id="call_s",
            tool_name="shot",
            content=[TextContent(text="screen"), ImageContent(PNG, "image/jpeg")],
        ),
    ]
    with StubServer([Reply(events=[*_text_item(0, "A cat."), _completed()])]) as server:
        [events] = await collect_each(_provider(server), Request(model="gpt-5", messages=messages))
    assert isinstance(events[-1], DoneEvent)
    sent = server.requests[0].body["input"]
    assert sent[0] == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        ],
    }
    assert sent[2] == {
        "type": "function_call_output",
        "call_id": "call_s",
        "output": [
            {"type": "input_text", "text": "screen"},
            {"type": "input_image", "image_url": f"data:image/jpeg;base64,{PNG}", "detail": "auto"},
        ],
    }


@pytest.mark.anyio
async def test_429_waits_for_retry_after_and_retries() -> None:
    limited = Reply(
        429,
        {"retry-after": "7"},
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
    )
    sleeps = Sleeps()
    script = [*_text_item(0, "ok"), _completed()]
    with StubServer([limited, Reply(events=script)]) as server:
        [events] = await collect_each(_provider(server, sleeps), Request(model="gpt-5", messages=[UserMessage(content="hi")]))  # fmt: skip
    assert sleeps.waits == [7.0] and len(server.requests) == 2
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.content == [TextContent(text="ok")]


@pytest.mark.anyio
async def test_stream_errors_and_truncation_end_the_turn_as_the_contract_says() -> None:
    failed = [
        *_text_item(0, "par"),
        _event("error", code="server_error", message="The server had an error", param=None),
    ]
    truncated = [
        *_text_item(0, "long"),
        _event("response.incomplete", response={
            "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 5, "output_tokens": 9}}),
    ]  # fmt: skip
    sleeps = Sleeps()
    request = Request(model="gpt-5", messages=[UserMessage(content="hi")])
    with StubServer([Reply(events=failed), Reply(events=truncated)]) as server:
        error_events, length_events = await collect_each(
            _provider(server, sleeps), request, request
        )
    error = error_events[-1]
    assert isinstance(error, ErrorEvent) and error.retryable
    assert error.error.error_message == "openai 200 server_error: The server had an error"
    done = length_events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "length"
    assert done.message.usage is not None and done.message.usage.output == 9


def test_the_registry_resolves_it_with_the_openai_key() -> None:
    selection = resolve_model("openai-responses/gpt-5-codex", env={"OPENAI_API_KEY": "sk-x"})
    assert isinstance(selection.provider, OpenAIResponsesProvider)
    assert selection.ref == "openai-responses/gpt-5-codex"
    assert selection.model.supports_thinking and selection.model.cost is not None
    with pytest.raises(ValueError, match="openai-responses needs an API key: set OPENAI_API_KEY"):
        resolve_model("openai-responses/gpt-5", env={})
    assert "OPENAI_API_KEY" in key_variables()


def test_a_status_error_is_the_headless_one_line_error(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    bad = Reply(
        400,
        json_body={
            "error": {
                "message": "Unsupported parameter: 'temperature'.",
                "type": "invalid_request_error",
            }
        },
    )
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config"), "OPENAI_API_KEY": "sk-test"}
    with StubServer([bad]) as server:
        env["OPENAI_BASE_URL"] = f"{server.url}/v1"
        done = ask("openai-responses/gpt-5", tmp_path, env)
    assert done.returncode == 1
    assert done.stderr == (
        "coding-agent: error: the turn ended unanswered (model openai-responses/gpt-5): "
        "openai 400: Unsupported parameter: 'temperature'.\n"
    )
    assert server.requests[0].path == "/v1/responses"
