"""Images in requests, through the real SDKs against the local stub server (issue 18 item 5).

A conversation with an image the user attached and an image a ``read`` returned goes out in
each provider's native format: Anthropic ``image`` blocks with a base64 ``source`` (in the user
turn and inside the ``tool_result``), OpenAI ``image_url`` data URLs (a ``tool`` message holds
text only, so the tool's image follows it in a user message).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import msgspec
import pytest
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND
from coding_agent.context.images import prepare_image_file
from coding_agent.settings.model_config import OPENAI_COMPAT
from coding_agent.worker.providers.anthropic import AnthropicProvider
from coding_agent.worker.providers.openai import OpenAIProvider, build_params
from pico3.models import DoneEvent, Request, RetryPolicy, messages_from_json

pytestmark = pytest.mark.anyio


@pytest.fixture
def pictures(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A PNG the user attaches and a JPEG a tool returned, as harness image blocks."""
    from PIL import Image

    Image.new("RGB", (8, 4), (1, 2, 3)).save(tmp_path / "a.png")
    buffer = io.BytesIO()
    Image.new("RGB", (3000, 1500), (9, 9, 9)).save(buffer, "JPEG")
    (tmp_path / "b.jpg").write_bytes(buffer.getvalue())
    return (
        prepare_image_file(tmp_path / "a.png").block(),
        prepare_image_file(tmp_path / "b.jpg").block(),
    )


def conversation(user_image: dict[str, Any], tool_image: dict[str, Any]) -> list[Any]:
    return messages_from_json(
        [
            {"role": "user", "content": [{"type": "text", "text": "what is this?"}, user_image]},
            {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}],
            },
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "read",
                "content": [{"type": "text", "text": "Read image file b.jpg"}, tool_image],
            },
        ]
    )


def anthropic_reply() -> Reply:
    message = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    return Reply(
        events=[
            sse({"type": "message_start", "message": message}, "message_start"),
            sse(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                "content_block_start",
            ),
            sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "a square"},
                },
                "content_block_delta",
            ),
            sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 2},
                },
                "message_delta",
            ),
            sse({"type": "message_stop"}, "message_stop"),
        ]
    )


def openai_reply() -> Reply:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4.1",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return sse(body)

    return Reply(
        events=[
            chunk({"role": "assistant", "content": "a square"}),
            chunk({}, "stop"),
            sse("[DONE]"),
        ]
    )


async def test_anthropic_sends_base64_image_blocks_in_the_user_turn_and_the_tool_result(
    pictures: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    user_image, tool_image = pictures
    request = Request(model="claude-sonnet-4-6", messages=conversation(user_image, tool_image))
    with StubServer([anthropic_reply()]) as server:
        provider = AnthropicProvider(
            api_key="k", base_url=server.url, retry=RetryPolicy(max_retries=0)
        )
        try:
            events = [e async for e in provider.stream(request, BACKGROUND)]
        finally:
            await provider.aclose()
    assert isinstance(events[-1], DoneEvent)
    first, _assistant, results = server.requests[0].body["messages"]
    assert first["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": user_image["data"]},
    }
    (result,) = results["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "c1"
    image = result["content"][1]
    assert image["type"] == "image"
    assert image["source"]["media_type"] == "image/jpeg"
    assert image["source"]["data"] == tool_image["data"]


async def test_openai_sends_data_urls_and_a_tools_image_in_the_next_user_message(
    pictures: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    user_image, tool_image = pictures
    request = Request(model="gpt-4.1", messages=conversation(user_image, tool_image))
    with StubServer([openai_reply()]) as server:
        provider = OpenAIProvider(
            api_key="k", base_url=f"{server.url}/v1", retry=RetryPolicy(max_retries=0)
        )
        try:
            events = [e async for e in provider.stream(request, BACKGROUND)]
        finally:
            await provider.aclose()
    assert isinstance(events[-1], DoneEvent)
    user, _assistant, tool, follow = server.requests[0].body["messages"]
    assert user["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{user_image['data']}"},
    }
    assert tool == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Read image file b.jpg\n(1 image(s) attached in the next message)",
    }
    assert follow["role"] == "user"
    assert follow["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/jpeg;base64,{tool_image['data']}"},
    }


def test_openai_leaves_tool_images_out_for_a_model_without_images(
    pictures: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    user_image, tool_image = pictures
    info = msgspec.structs.replace(
        OpenAIProvider(api_key="k").model("gpt-4.1"), supports_images=False
    )
    params = build_params(
        Request(model="gpt-4.1", messages=conversation(user_image, tool_image)), info, OPENAI_COMPAT
    )
    assert [m["role"] for m in params["messages"]] == ["user", "assistant", "tool"]
    assert params["messages"][2]["content"].endswith(
        "(image output omitted: this model takes no images)"
    )
