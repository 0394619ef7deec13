"""A conversation for the TUI tests: a real chord ``replicated_state`` the test mutates.

:class:`FakeConversation` plays the session worker's side. Its ``state`` is the authoritative
view document (``replicated_state``), reached by the app through a :class:`ViewRelay` exactly as a
real client would reach a remote replica; ``send``/``abort``/``input_abort`` record the call and
apply what the harness would commit (docs/design/view.md#commit-mapping) so the test sees the UI react.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.state import MutableReplicatedState, replicated_state
from coding_agent.tui.conversation import InputAbortResult, SendMode, SessionInfo, ViewRelay


def empty_view(entries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "conversation": {"id": 1},
        "entries": entries or [],
        "config": {"model": {"provider": "faux", "modelId": "faux-1"}, "thinkingLevel": "off"},
        "inbox": [],
        "tasks": {},
        "plugins": {},
    }


def user_entry(entry_id: int, text: str) -> dict[str, Any]:
    return {
        "id": entry_id,
        "conversationId": 1,
        "kind": "pi.user",
        "model": [{"role": "user", "content": text, "timestamp": 0}],
    }


def assistant_message(
    *blocks: dict[str, Any], usage: dict[str, Any] | None = None, stop: str = "stop"
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": list(blocks),
        "provider": "faux",
        "model": "faux-1",
        "stopReason": stop,
        "timestamp": 0,
    }
    if usage is not None:
        message["usage"] = usage
    return message


def assistant_entry(entry_id: int, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": entry_id,
        "conversationId": 1,
        "kind": "pi.assistant",
        "model": [message],
        "data": {"attempt": 1},
    }


def tool_result_entry(
    entry_id: int,
    call_id: str,
    name: str,
    text: str,
    *,
    is_error: bool = False,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": entry_id,
        "conversationId": 1,
        "kind": "pi.tool_result",
        "model": [
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": text}],
                "isError": is_error,
                "timestamp": 0,
            }
        ],
    }
    if details is not None:
        entry["data"] = {"details": details}
    return entry


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


class FakeConversation:
    """The worker side of one conversation, driven by the test."""

    def __init__(self, document: dict[str, Any] | None = None) -> None:
        self.state: MutableReplicatedState = replicated_state(document or empty_view())
        self.relay = ViewRelay()
        self.relay.follow(self.state)
        self.session = SessionInfo(
            session_id="0123456789abcdef",
            cwd="/work/project",
            model="faux/faux-1",
            context_window=200_000,
        )
        self.sent: list[tuple[str, SendMode]] = []
        self.aborts = 0
        self.input_aborts: list[int] = []
        self._next_id = 1000

    # -- the ConversationClient protocol --------------------------------------------------
    @property
    def view(self) -> ViewRelay:
        return self.relay

    async def send(self, text: str, mode: SendMode, ctx: Context) -> int:
        self.sent.append((text, mode))
        self._next_id += 1
        input_id = self._next_id
        if mode == "prompt":

            def place(doc: Any) -> None:
                doc["entries"].append(user_entry(input_id, text))
                doc["turn"] = {
                    "inputs": [input_id],
                    "generation": {"stage": "preparing"},
                    "tools": [],
                }

            self.state.change(ctx, place)
        else:

            def queue(doc: Any) -> None:
                doc["inbox"].append({"id": input_id, "mode": mode, "input": {"content": text}})

            self.state.change(ctx, queue)
        return input_id

    async def abort(self, ctx: Context) -> None:
        self.aborts += 1

        def drop(doc: Any) -> None:
            inbox = doc["inbox"]
            for index in reversed(range(len(inbox))):
                if inbox[index]["mode"] in ("steer", "followUp"):
                    del inbox[index]
            if "turn" in doc:
                del doc["turn"]

        self.state.change(ctx, drop)

    async def input_abort(self, input_id: int, ctx: Context) -> InputAbortResult:
        self.input_aborts.append(input_id)
        ids = [item["id"] for item in self.state.value["inbox"]]
        if input_id not in ids:
            return "not_found"

        def remove(doc: Any) -> None:
            inbox = doc["inbox"]
            for index in reversed(range(len(inbox))):
                if inbox[index]["id"] == input_id:
                    del inbox[index]

        self.state.change(ctx, remove)
        return "aborted"

    # -- test controls -----------------------------------------------------------------------
    def change(self, mutate: Any) -> None:
        self.state.change(BACKGROUND, mutate)

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id


UNTIL_SECONDS = 60.0
"""The deadline of :func:`until` (generous: a loaded machine is slow)."""


async def until(pilot: Any, predicate: Any) -> None:
    """Let the app run until ``predicate()`` holds (a state wait, not a sleep), within
    :data:`UNTIL_SECONDS`: a count of ``pilot.pause()`` would be a deadline that shrinks on a
    loaded machine (each pause ends as soon as the process looks idle)."""
    try:
        with anyio.fail_after(UNTIL_SECONDS):
            while not predicate():
                await pilot.pause()
    except TimeoutError:
        raise AssertionError(f"condition never became true within {UNTIL_SECONDS} s") from None


@pytest.fixture
def conversation() -> FakeConversation:
    return FakeConversation()


@pytest.fixture
def docs() -> SimpleNamespace:
    """Builders of view documents and entries."""
    return SimpleNamespace(
        empty_view=empty_view,
        user_entry=user_entry,
        assistant_message=assistant_message,
        assistant_entry=assistant_entry,
        tool_result_entry=tool_result_entry,
        text_block=text_block,
        FakeConversation=FakeConversation,
        until=until,
    )
