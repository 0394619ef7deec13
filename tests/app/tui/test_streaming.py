"""A prompt becomes a streamed answer; the stream never builds a backlog (issue 8, Tests)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.app import turn_status
from coding_agent.tui.widgets import AssistantView
from coding_agent.tui.widgets.markdown import MessageMarkdown

pytestmark = pytest.mark.anyio


def _start_stream(doc: Any) -> None:
    doc["turn"]["generation"] = {"stage": "streaming", "attempt": 1}
    doc["turn"]["message"] = {
        "role": "assistant",
        "content": [{"type": "text", "text": ""}],
        "provider": "faux",
        "model": "faux-1",
        "stopReason": "stop",
        "timestamp": 0,
    }


async def test_prompt_streams_an_answer_then_the_entry_takes_over(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"hello", "enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("hello", "prompt")]
        await app.wait_rendered()
        assert app.busy
        user_id = app.transcript.rendered_ids[-1]

        conversation.change(_start_stream)
        for word in ["The ", "answer ", "is ", "**42**."]:
            conversation.change(
                lambda doc, w=word: doc["turn"]["message"]["content"][0].__setitem__(
                    "text", doc["turn"]["message"]["content"][0]["text"] + w
                )
            )
            await app.wait_rendered()
        live = app.transcript.live
        assert live is not None and live.text == "The answer is **42**."

        final = docs.assistant_message(
            docs.text_block("The answer is **42**."),
            usage={
                "input": 120,
                "output": 8,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 128,
                "cost": {"total": 0.25},
            },
        )

        def finish(doc: Any) -> None:
            doc["entries"].append(docs.assistant_entry(user_id + 1, final))
            del doc["turn"]

        conversation.change(finish)
        await app.wait_rendered()
        await pilot.pause()
        assert app.transcript.live is None
        widget = app.transcript.widget_for(user_id + 1)
        assert widget is live, "the streamed widget becomes the entry's widget"
        assert isinstance(widget, AssistantView)
        await widget.stop_streams()
        markdown = widget.markdowns[0]
        assert markdown.source == "The answer is **42**."
        assert not app.busy
        footer = str(app.footer.status_line())
        assert "↑120 ↓8" in footer and "$0.250" in footer and "faux/faux-1" in footer


async def test_two_thousand_deltas_render_without_backlog(conversation, docs) -> None:
    """Issue 8: 2,000 tokens/s keep up; parses are bounded by frames, not by deltas."""
    conversation.change(lambda doc: doc.__setitem__("turn", {"inputs": [1], "tools": []}))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        conversation.change(_start_stream)
        expected: list[str] = []
        for index in range(2000):
            token = f"tok{index} " if index % 50 else f"\n\nParagraph {index}: "
            expected.append(token)
            conversation.change(
                lambda doc, t=token: doc["turn"]["message"]["content"][0].__setitem__(
                    "text", doc["turn"]["message"]["content"][0]["text"] + t
                )
            )
            if index % 20 == 0:
                await anyio.lowlevel.checkpoint()
        await app.wait_rendered()
        live = app.transcript.live
        assert live is not None
        await live.stop_streams()
        markdown = live.markdowns[0]
        assert isinstance(markdown, MessageMarkdown)
        assert markdown.source == "".join(expected)
        assert live.text == "".join(expected)
        # One render pass per frame at most: far fewer passes and parses than deltas.
        assert app.render_passes < 200
        assert markdown.parse_count < 200


def test_docs_fixture_is_shared(docs: SimpleNamespace) -> None:
    assert docs.empty_view()["entries"] == []


async def test_a_retry_drops_the_partial_and_shows_the_failed_attempt(conversation, docs) -> None:
    conversation.change(lambda doc: doc.__setitem__("turn", {"inputs": [1], "tools": []}))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        conversation.change(_start_stream)
        conversation.change(
            lambda doc: doc["turn"]["message"]["content"][0].__setitem__("text", "Half an ans")
        )
        await app.wait_rendered()
        assert app.transcript.live is not None

        def retry(doc: Any) -> None:
            del doc["turn"]["message"]
            doc["turn"]["generation"] = {
                "stage": "retrying",
                "attempt": 1,
                "retryAt": 0,
                "lastError": "overloaded",
            }
            doc["entries"].append(
                {
                    "id": 5,
                    "conversationId": 1,
                    "kind": "pi.usage",
                    "data": {"attempt": 1, "error": "overloaded"},
                }
            )

        conversation.change(retry)
        await app.wait_rendered()
        assert app.transcript.live is None
        assert app.transcript.rendered_ids == [5]
        assert app.transcript.widget_for(5) is not None
        assert app.busy
        assert turn_status(conversation.state.value) == "Retrying (attempt 1): overloaded"
