"""Request bodies built with the per-record wire memo are the bodies built without it."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec

from coding_agent.settings.model_config import OPENAI_COMPAT
from coding_agent.worker.providers import anthropic, openai
from pico3.models import ModelInfo, Request, messages_from_json

PNG = {"type": "image", "data": "AA==", "mimeType": "image/png"}


def _history(rng: random.Random, size: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(size):
        roll = rng.random()
        if roll < 0.3:
            out.append({"role": "user", "content": f"u{n}"})
        elif roll < 0.4:
            out.append({"role": "user", "content": [{"type": "text", "text": f"t{n}"}, PNG]})
        elif roll < 0.6:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": f"a{n}"}]
            if rng.random() < 0.5:
                blocks.append({"type": "toolCall", "id": f"c{n}", "name": "ls", "arguments": {}})
            if rng.random() < 0.2:
                blocks = [{"type": "thinking", "thinking": ""}]  # nothing to send
            out.append({"role": "assistant", "content": blocks})
        elif roll < 0.9:
            content: list[dict[str, Any]] = [{"type": "text", "text": f"r{n}"}]
            if rng.random() < 0.3:
                content.append(PNG)
            out.append(
                {"role": "toolResult", "toolCallId": f"c{n}", "toolName": "ls", "content": content}
            )
        else:
            out.append({"role": "system", "content": f"s{n}"})
    return out


def test_memoized_bodies_match_plain_bodies_turn_after_turn() -> None:
    rng = random.Random(15)
    history = messages_from_json(_history(rng, 300))
    oa_memos = {True: openai.wire_memo(True), False: openai.wire_memo(False)}
    an_memo = anthropic.wire_memo()
    for end in range(1, len(history) + 1, 7):  # the same records, growing: memo hits
        request = Request(model="m", messages=history[:end], system=["sys"])
        for images in (True, False):
            info = ModelInfo(id="m", provider="openai", supports_images=images)
            memo = oa_memos[images]
            got = openai.build_params(request, info, OPENAI_COMPAT, memo=memo)
            plain = openai.build_params(request, info, OPENAI_COMPAT)
            assert json.loads(msgspec.json.encode(got)) == json.loads(msgspec.json.encode(plain))
        info = ModelInfo(id="m", provider="anthropic")
        got = anthropic.build_params(request, info, memo=an_memo)
        plain = anthropic.build_params(request, info)
        assert json.loads(msgspec.json.encode(got)) == json.loads(msgspec.json.encode(plain))


def test_a_request_that_does_not_extend_the_last_one_folds_from_scratch() -> None:
    """A rewound (shorter) or changed history, after a longer one, still gets its own body."""
    history = messages_from_json(_history(random.Random(7), 60))
    info = ModelInfo(id="m", provider="openai", supports_images=True)
    memo = openai.wire_memo(info.supports_images)
    changed = [*history[:30], *messages_from_json([{"role": "user", "content": "other"}])]
    for messages in (history, history[:20], changed, history):
        request = Request(model="m", messages=messages)
        got = openai.build_params(request, info, OPENAI_COMPAT, memo=memo)
        plain = openai.build_params(request, info, OPENAI_COMPAT)
        assert json.loads(msgspec.json.encode(got)) == json.loads(msgspec.json.encode(plain))


def test_bodies_match_when_the_history_grows_one_record_at_a_time() -> None:
    """The encoded messages are joined into one buffer as they become final: every growth (an
    assistant, a tool result joining a run, images waiting for the run's end, a new user
    message) still gives the plain body, and so does the same request again."""
    history = messages_from_json(_history(random.Random(19), 200))
    an_info = ModelInfo(id="m", provider="anthropic")
    an_memo = anthropic.wire_memo()
    oa_info = ModelInfo(id="m", provider="openai", supports_images=True)
    oa_memo = openai.wire_memo(True)
    for end in [*range(1, len(history) + 1), len(history)]:
        request = Request(model="m", messages=history[:end])
        got = anthropic.build_params(request, an_info, memo=an_memo)
        plain = anthropic.build_params(request, an_info)
        assert json.loads(msgspec.json.encode(got)) == json.loads(msgspec.json.encode(plain))
        got = openai.build_params(request, oa_info, OPENAI_COMPAT, memo=oa_memo)
        plain = openai.build_params(request, oa_info, OPENAI_COMPAT)
        assert json.loads(msgspec.json.encode(got)) == json.loads(msgspec.json.encode(plain))


def test_joined_chunks_encode_as_the_values_one_by_one_and_stay_few() -> None:
    from coding_agent.worker.providers._memo import JoinedChunks

    rng = random.Random(45)
    chunks = JoinedChunks()
    values: list[Any] = []
    assert not chunks and chunks.raws() == []
    for _ in range(2_000):
        added = [{"n": len(values) + k, "text": "x" * rng.randint(0, 300)} for k in range(2)]
        values.extend(added)
        chunks.extend([msgspec.json.encode(value) for value in added])
        chunks.extend([])
    body = msgspec.json.encode([*chunks.raws(), {"last": True}])
    assert body == msgspec.json.encode([*values, {"last": True}])
    assert len(chunks.raws()) <= len(body).bit_length()  # each more than twice the next
