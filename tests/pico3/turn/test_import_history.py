"""``ConversationHandle.import_history``: another agent's conversation becomes the entries a
turn would have written, in one commit, and the next turn's model reads it."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.models import AssistantMessage, ToolResultMessage, UserMessage
from pico3.models.faux import faux_response

pytestmark = pytest.mark.anyio

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "list the files", "timestamp": 1},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "ls it", "signature": "sig"},
            {"type": "toolCall", "id": "call_1", "name": "ls", "arguments": {"path": "."}},
        ],
        "api": "import:pi",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "stopReason": "toolUse",
        "timestamp": 2,
    },
    {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "ls",
        "content": [{"type": "text", "text": "README.md"}],
        "isError": False,
        "timestamp": 3,
    },
]


async def test_imported_history_is_the_next_requests_context(open_session: Any) -> None:
    async with open_session([faux_response("seen")]) as s:
        ids = await s.root.import_history(HISTORY, BACKGROUND, data=[{"imported": 1}, None, None])
        entries = await s.entries()
        assert [e.id for e in entries] == ids
        assert [e.kind for e in entries] == ["pi.user", "pi.assistant", "pi.tool_result"]
        assert entries[0].data == {"imported": 1}
        await (await s.root.send("and now?", BACKGROUND)).wait(BACKGROUND)
        (request,) = s.faux.state.requests
        kinds = [type(m) for m in request.messages]
        assert kinds == [UserMessage, AssistantMessage, ToolResultMessage, UserMessage]
        assert request.messages[1].api == "import:pi"


async def test_an_import_goes_only_into_an_empty_conversation(open_session: Any) -> None:
    async with open_session([faux_response("hi")]) as s:
        await (await s.root.send("hello", BACKGROUND)).wait(BACKGROUND)
        before = await s.entries()
        with pytest.raises(ValueError, match="has entries: import into a new one"):
            await s.root.import_history(HISTORY, BACKGROUND)
        assert await s.entries() == before


async def test_a_message_of_another_role_writes_nothing(open_session: Any) -> None:
    async with open_session() as s:
        bad = [*HISTORY, {"role": "system", "content": "x", "timestamp": 4}]
        with pytest.raises(ValueError, match="message 3 has role 'system'"):
            await s.root.import_history(bad, BACKGROUND)
        assert await s.entries() == []
