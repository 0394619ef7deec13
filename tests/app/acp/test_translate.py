"""The view → ACP mapping on its own (issue 43 deliver 1): streamed chunks, tool calls with
their kind, locations and diffs, a replayed transcript, and ACP prompt blocks → our content."""

from __future__ import annotations

import base64
from pathlib import Path

from acp.schema import (
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from coding_agent.acp.translate import (
    MessageStream,
    prompt_content,
    replay,
    tool_call_result,
    tool_kind,
)

CWD = Path("/home/me/repo")


def _dump(updates: list[object]) -> list[dict[str, object]]:
    return [u.model_dump(exclude_none=True) for u in updates]  # type: ignore[attr-defined]


def test_a_live_message_streams_only_what_it_gained_and_the_stored_answer_the_rest() -> None:
    stream = MessageStream()
    first = {"content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Hel"}]}
    grown = {
        "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Hello"}]
    }
    assert [(u["session_update"], u["content"]["text"]) for u in _dump(stream.live(first))] == [
        ("agent_thought_chunk", "hm"), ("agent_message_chunk", "Hel")
    ]  # fmt: skip
    assert [u["content"]["text"] for u in _dump(stream.live(grown))] == ["m", "lo"]
    assert stream.live(grown) == []
    stored = {"content": [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Hello there"},
        {"type": "toolCall", "id": "t1", "name": "edit",
         "arguments": {"path": "src/a.py", "edits": [{"oldText": "a", "newText": "b"}]}},
    ]}  # fmt: skip
    updates = _dump(stream.stored(stored, CWD))
    assert updates[0]["content"]["text"] == " there"
    assert updates[1] == {
        "session_update": "tool_call", "tool_call_id": "t1", "title": "edit src/a.py",
        "kind": "edit", "status": "pending",
        "locations": [{"path": "/home/me/repo/src/a.py"}],
        "raw_input": {"path": "src/a.py", "edits": [{"oldText": "a", "newText": "b"}]},
    }  # fmt: skip
    # The next answer starts from nothing.
    assert [u["content"]["text"] for u in _dump(stream.live(first))] == ["hm", "Hel"]


def test_tool_results_are_completed_or_failed_with_text_and_diffs() -> None:
    call = {"id": "t1", "name": "edit",
            "arguments": {"path": "a.py", "edits": [{"oldText": "x = 1", "newText": "x = 2"}]}}  # fmt: skip
    ok = {
        "toolCallId": "t1",
        "content": [{"type": "text", "text": "Edited a.py"}],
        "isError": False,
    }
    done = _dump([tool_call_result(ok, call, CWD)])[0]
    assert done["status"] == "completed"
    assert done["content"] == [
        {"type": "content", "content": {"type": "text", "text": "Edited a.py"}},
        {"type": "diff", "path": "/home/me/repo/a.py", "old_text": "x = 1", "new_text": "x = 2"},
    ]
    bad = {"toolCallId": "t1", "content": [{"type": "text", "text": "denied"}], "isError": True}
    failed = _dump([tool_call_result(bad, call, CWD)])[0]
    assert failed["status"] == "failed" and len(failed["content"]) == 1  # no diff: nothing changed
    assert [tool_kind(n) for n in ("read", "bash", "grep", "web_fetch", "mystery")] == [
        "read", "execute", "search", "fetch", "other"
    ]  # fmt: skip


def test_a_stored_transcript_replays_in_order() -> None:
    entries = [
        {"kind": "pi.user", "model": [{"role": "user", "content": "fix it"}]},
        # not typed by the user (an imported slash command's prompt): the model's, not shown
        {"kind": "pi.user", "model": [{"role": "user", "content": "<command-name>/review"}],
         "data": {"typed": "/review"}},  # an imported command: as typed
        {"kind": "pi.user", "model": [{"role": "user", "content": "Review it all."}],
         "data": {"meta": "expanded /review prompt"}},
        {"kind": "pi.system", "model": [{"role": "system", "content": "ignored"}]},
        {"kind": "pi.assistant", "model": [{"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a.py"}}]}]},
        {"kind": "pi.tool_result", "model": [{"role": "toolResult", "toolCallId": "c",
                                             "content": [{"type": "text", "text": "x"}]}]},
        {"kind": "pi.assistant", "model": [{"role": "assistant", "content": [
            {"type": "text", "text": "Fixed."}]}]},
    ]  # fmt: skip
    kinds = [(u["session_update"], u.get("content", {}).get("text") if isinstance(u.get("content"), dict) else u.get("status"))
             for u in _dump(replay(entries, CWD))]  # fmt: skip
    assert kinds == [
        ("user_message_chunk", "fix it"),
        ("user_message_chunk", "/review"),
        ("agent_message_chunk", "Looking."),
        ("tool_call", "pending"),
        ("tool_call_update", "completed"),
        ("agent_message_chunk", "Fixed."),
    ]


def test_prompt_blocks_become_our_message_content() -> None:
    png = base64.b64encode(b"\x89PNG fake").decode()
    blocks = [
        TextContentBlock(type="text", text="Review"),
        ResourceContentBlock(type="resource_link", name="a.py", uri="file:///home/me/repo/src/a.py"),
        ResourceContentBlock(type="resource_link", name="spec", uri="https://example.com/spec"),
        EmbeddedResourceContentBlock(type="resource", resource=TextResourceContents(
            uri="file:///home/me/repo/b.py", text="print('b')")),
        EmbeddedResourceContentBlock(type="resource", resource=BlobResourceContents(
            uri="file:///x.bin", blob=base64.b64encode(b"abc").decode(), mime_type="application/zip")),
        ImageContentBlock(type="image", data=png, mime_type="image/png"),
    ]  # fmt: skip
    content = prompt_content(blocks, CWD)
    assert content[0] == {
        "type": "text", "text": "Review @src/a.py [spec](https://example.com/spec)"
    }  # fmt: skip
    assert content[1] == {"type": "image", "data": png, "mimeType": "image/png"}
    assert content[2]["text"] == (
        "<context ref=\"file:///home/me/repo/b.py\">\nprint('b')\n</context>\n\n"
        "[attached file:///x.bin: application/zip, 3 bytes, not shown]"
    )
