"""/context's budget (issue 38 item 7): the window's parts, estimated or measured."""

from __future__ import annotations

from typing import Any

from coding_agent.tui.commands.context_budget import IMAGE_TOKENS, bar, budget


def _entry(id: int, kind: str, *messages: dict[str, Any]) -> dict[str, Any]:
    return {"id": id, "conversationId": 1, "kind": kind, "model": list(messages)}


def _answer(id: int, text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    if usage is not None:
        message["usage"] = usage
    return _entry(id, "pi.assistant", message)


def _view(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"conversation": {"id": 1}, "entries": list(entries), "config": {}}


def test_without_a_measurement_every_part_is_estimated_at_four_characters_a_token() -> None:
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    prompt = {"role": "user", "content": [{"type": "text", "text": "x" * 400}, image]}
    system = _entry(1, "pi.system", {"role": "system", "content": "s" * 4000})
    spent = budget(
        _view(system, _entry(2, "pi.user", prompt), _answer(3, "y" * 40)), 1000, 500, 10_000
    )
    assert spent.conversation.describe() == "1 prompt, 1 answer, 0 tool results"
    assert spent.messages == 100 + IMAGE_TOKENS + 10  # the system entry is the system prompt
    assert spent.used == 1000 + 500 + spent.messages and spent.measured == 0
    assert spent.free == 10_000 - spent.used


def test_a_measured_request_is_the_total_and_what_came_after_is_added() -> None:
    usage = {"input": 9000, "output": 100, "cacheRead": 0, "cacheWrite": 0,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}  # fmt: skip
    prompt = {"role": "user", "content": "z" * 80}
    view = _view(_answer(1, "first", usage), _entry(2, "pi.user", prompt))
    spent = budget(view, 1000, 500, 20_000)
    assert spent.measured == spent.reported == 9100 and spent.used == 9100 + 20
    assert spent.messages == spent.used - 1500
    assert spent.percent == 100.0 * 9120 / 20_000
    # a count smaller than what it must have held (the faux model's) is not the total
    small = {**usage, "input": 10, "output": 1}
    refused = budget(_view(_answer(1, "first", small)), 1000, 500, 20_000)
    assert refused.measured == 0 and refused.used > 1500
    assert refused.reported == 11, "what the footer and /cost show: /context names it"


def test_the_bar_fills_its_share_and_shows_any_use() -> None:
    assert bar(0, 100) == "░" * 20
    assert bar(1, 1000) == "█" + "░" * 19
    assert bar(50, 100) == "█" * 10 + "░" * 10
    assert bar(500, 100) == "█" * 20
