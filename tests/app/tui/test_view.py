"""Following the view: rebaselines, unavailability, the lazy tail, compaction and tasks."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Static

from chord.context import BACKGROUND
from chord.state import ReplicaState, replicated_state
from coding_agent.tui import CodingAgentApp
from coding_agent.tui.app import UNAVAILABLE
from coding_agent.tui.widgets import TAIL, AssistantView, ThinkingBlock
from pico3 import CustomEntry
from pico3.models import TextContent

pytestmark = pytest.mark.anyio


def _transcript(docs: Any, count: int, start: int = 1) -> list[dict[str, Any]]:
    entries = []
    for entry_id in range(start, start + count):
        if entry_id % 2:
            entries.append(docs.user_entry(entry_id, f"question {entry_id}"))
        else:
            entries.append(
                docs.assistant_entry(
                    entry_id, docs.assistant_message(docs.text_block(f"answer {entry_id}"))
                )
            )
    return entries


async def test_hydrate_with_a_different_document_rerenders(conversation, docs) -> None:
    conversation.change(lambda doc: doc["entries"].extend(_transcript(docs, 6)))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        assert app.transcript.rendered_ids == [1, 2, 3, 4, 5, 6]

        # The worker restarted with another document (say, a forked session): a hydrate.
        other = docs.empty_view(_transcript(docs, 3, start=40))
        other["turn"] = {
            "inputs": [42],
            "tools": [],
            "message": docs.assistant_message(docs.text_block("streaming again")),
        }
        conversation.relay.follow(replicated_state(other))
        await app.wait_rendered()
        assert app.transcript.rendered_ids == [40, 41, 42]
        assert app.transcript.widget_for(1) is None
        live = app.transcript.live
        assert live is not None and live.text == "streaming again"
        assert app.busy
        widget = app.transcript.widget_for(40)
        assert isinstance(widget, AssistantView) and widget.text == "answer 40"


async def test_none_shows_the_unavailable_banner_until_the_next_hydrate(conversation, docs) -> None:
    conversation.change(lambda doc: doc["entries"].extend(_transcript(docs, 2)))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        banner = app.query_one("#unavailable")
        assert not banner.display

        conversation.relay.detach()
        await app.wait_rendered()
        assert banner.display
        assert UNAVAILABLE.startswith("Worker unavailable")
        assert "reconnecting" in app.footer.status_line().plain
        assert not app.busy

        conversation.relay.follow(conversation.state)
        await app.wait_rendered()
        assert not banner.display
        assert app.transcript.rendered_ids == [1, 2]


async def test_a_cold_replica_starts_unavailable_and_hydrates_later(docs) -> None:
    conversation = docs.FakeConversation()
    replica = ReplicaState()
    conversation.relay.follow(replica)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        assert app.query_one("#unavailable").display
        replica.hydrate(5, [("r", docs.empty_view(_transcript(docs, 2)))], BACKGROUND)
        await app.wait_rendered()
        assert not app.query_one("#unavailable").display
        assert app.transcript.rendered_ids == [1, 2]
        replica.update(6, [("p", ("entries",), 2, 0, [docs.user_entry(3, "more")])], BACKGROUND)
        await app.wait_rendered()
        assert app.transcript.rendered_ids == [1, 2, 3]


async def test_long_sessions_render_the_tail_and_load_earlier_pages(docs) -> None:
    total = TAIL * 2 + 50
    conversation = docs.FakeConversation(docs.empty_view(_transcript(docs, total)))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        ids = app.transcript.rendered_ids
        assert ids == list(range(total - TAIL + 1, total + 1))
        more = app.query_one("#load-earlier")
        assert more.display
        assert await app.transcript.load_earlier() == TAIL
        assert app.transcript.rendered_ids[0] == total - 2 * TAIL + 1
        more.press()  # type: ignore[attr-defined]  # the button is scrolled out of view
        await docs.until(pilot, lambda: app.transcript.rendered_ids[0] == 1)
        assert app.transcript.rendered_ids == list(range(1, total + 1))
        assert not more.display
        # appends still land at the end
        conversation.change(lambda doc: doc["entries"].append(docs.user_entry(total + 1, "x")))
        await app.wait_rendered()
        assert app.transcript.rendered_ids[-1] == total + 1


async def test_compaction_banner_then_head_drops_old_entries(conversation, docs) -> None:
    conversation.change(lambda doc: doc["entries"].extend(_transcript(docs, 6)))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        conversation.change(
            lambda doc: doc.__setitem__(
                "compaction",
                {"taskId": 9, "reason": "threshold", "stage": "summarizing", "attempt": 1},
            )
        )
        await app.wait_rendered()
        banner = app.query_one("#compaction")
        assert banner.display

        def summarised(doc: Any) -> None:
            del doc["compaction"]
            del doc["entries"][0:4]
            doc["entries"].append(
                {
                    "id": 7,
                    "conversationId": 1,
                    "kind": "pi.summary",
                    "head": 5,
                    "model": [{"role": "user", "content": "Summary: asked 4 questions."}],
                    "data": {"through": 4},
                }
            )

        conversation.change(summarised)
        await app.wait_rendered()
        assert not banner.display
        assert app.transcript.rendered_ids == [5, 6, 7]
        assert app.transcript.widget_for(7) is not None


async def test_tasks_panel_follows_view_tasks(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        assert not app.tasks_panel.display
        conversation.change(
            lambda doc: doc["tasks"].__setitem__(
                "12",
                {
                    "kind": "repo.indexer",
                    "background": True,
                    "status": {"phase": "indexing", "done": 5, "total": 20},
                },
            )
        )
        await app.wait_rendered()
        assert app.tasks_panel.display
        assert "repo.indexer" in app.tasks_panel.summary
        assert "5/20 (25%)" in app.tasks_panel.summary
        conversation.change(lambda doc: doc["tasks"].__delitem__("12"))
        await app.wait_rendered()
        assert not app.tasks_panel.display


async def test_tasks_panel_shows_the_open_todo_list(conversation, docs) -> None:
    todos = [
        {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
        {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
    ]
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        assert not app.tasks_panel.display
        conversation.change(
            lambda doc: doc.__setitem__("plugins", {"coding-agent.todo": {"todos": todos}})
        )
        await app.wait_rendered()
        assert app.tasks_panel.display
        assert app.tasks_panel.summary.splitlines() == [
            "Todo 1/3",
            "✔ Read the code",
            "▶ Fixing the bug",
            "○ Run the tests",
        ]
        finished = [{**item, "status": "completed"} for item in todos]
        conversation.change(
            lambda doc: doc["plugins"]["coding-agent.todo"].__setitem__("todos", finished)
        )
        await app.wait_rendered()
        assert not app.tasks_panel.display  # a finished list is put away


async def test_thinking_is_collapsed_and_display_only_entries_are_marked(
    conversation, docs
) -> None:
    thinking = {"type": "thinking", "thinking": "Let me think."}
    aborted = docs.assistant_message(docs.text_block("partial"), stop="aborted")
    conversation.change(
        lambda doc: doc["entries"].extend(
            [
                docs.assistant_entry(1, docs.assistant_message(thinking, docs.text_block("Done."))),
                {
                    "id": 2,
                    "conversationId": 1,
                    "kind": "pi.assistant",
                    "data": {"attempt": 1, "display": aborted, "reason": "aborted"},
                },
                {
                    "id": 3,
                    "conversationId": 1,
                    "kind": "pi.notice",
                    "model": [{"role": "user", "content": "Build finished"}],
                },
                {"id": 4, "conversationId": 1, "kind": "pi.system", "model": []},
            ]
        )
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        block = app.query_one(ThinkingBlock)
        assert block.collapsed and block.text == "Let me think."
        await pilot.press("ctrl+t")
        assert not block.collapsed
        display_only = app.transcript.widget_for(2)
        assert isinstance(display_only, AssistantView) and display_only.has_class("display-only")
        assert display_only.note == "■ Interrupted by user"  # the user stopped it
        assert app.transcript.widget_for(3) is not None
        assert app.transcript.widget_for(4) is None
        assert app.transcript.rendered_ids == [1, 2, 3, 4]


async def test_an_answer_a_hook_stopped_names_the_hook_not_the_user(conversation, docs) -> None:
    """A ``PermissionRequest`` hook's deny with ``interrupt`` aborts the turn on the hook's
    behalf: the partial's ``data.stoppedBy`` names it, and the note says so."""
    aborted = docs.assistant_message(docs.text_block("partial"), stop="aborted")
    by = "PermissionRequest hook `./guard.sh`"
    data = {"attempt": 1, "display": aborted, "reason": "aborted", "stoppedBy": by}
    conversation.change(
        lambda doc: doc["entries"].append(
            {"id": 2, "conversationId": 1, "kind": "pi.assistant", "data": data}
        )
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        stopped = app.transcript.widget_for(2)
        assert isinstance(stopped, AssistantView)
        assert stopped.note == f"■ Stopped by {by}"


async def test_a_rebaseline_keeps_the_load_earlier_affordance(docs) -> None:
    conversation = docs.FakeConversation(docs.empty_view(_transcript(docs, TAIL + 10)))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        conversation.relay.follow(
            replicated_state(docs.empty_view(_transcript(docs, TAIL + 5, start=500)))
        )
        await app.wait_rendered()
        assert app.transcript.rendered_ids[0] == 505
        assert app.query_one("#load-earlier").display
        assert await app.transcript.load_earlier() == 5
        assert app.transcript.rendered_ids[0] == 500


async def test_a_features_entry_and_a_misfit_core_entry_render_without_a_display_error(
    conversation, docs
) -> None:
    conversation.change(
        lambda doc: doc["entries"].extend(
            [
                {"id": 1, "conversationId": 1, "kind": "feature.note",
                 "data": {"text": "indexed 3 files"}},
                {"id": 2, "conversationId": 1, "kind": "pi.notice",
                 "model": [{"role": "user", "content": 42}]},
                docs.user_entry(3, "still here"),
            ]
        )
    )  # fmt: skip
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        assert app.render_errors == []
        view = app.decoded_view
        assert view is not None
        note, misfit, _ = view.entries
        assert isinstance(note, CustomEntry) and note.error is None
        assert isinstance(misfit, CustomEntry) and misfit.error is not None  # says why
        shown = app.transcript.widget_for(1)
        assert isinstance(shown, Static)
        assert str(shown.render()) == "feature.note: indexed 3 files"
        assert app.transcript.widget_for(2) is None  # no text of its own to show
        assert app.transcript.rendered_ids == [1, 2, 3]


async def test_each_revision_is_decoded_once_and_what_did_not_change_is_kept(
    conversation, docs
) -> None:
    conversation.change(lambda doc: doc["entries"].append(docs.user_entry(1, "hi")))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        first = app.decoded_view
        assert first is not None and app.decoded_view is first  # asked twice: one decode

        def stream(doc: Any) -> None:
            message = docs.assistant_message(docs.text_block("Hel"))
            doc["turn"] = {"inputs": [1], "generation": {"stage": "streaming"},
                           "message": message, "tools": []}  # fmt: skip

        conversation.change(stream)
        await app.wait_rendered()
        second = app.decoded_view
        assert second is not None and second.entries is first.entries
        assert second.turn is not None and second.turn.message is not None

        def grow(doc: Any) -> None:
            block = doc["turn"]["message"]["content"][0]
            block["text"] += "lo"

        conversation.change(grow)
        await app.wait_rendered()
        third = app.decoded_view
        assert third is not None and third.entries is first.entries
        assert third.turn is not None and third.turn.generation is second.turn.generation
        assert third.turn.message is not None and third.turn.message.content == [
            TextContent("Hello")
        ]
        live = app.transcript.live
        assert live is not None and live.text == "Hello"
