"""A Claude Code or pi file with a line that cannot be read in the middle (not JSON, or longer
than a line may be): the chain of ``parentUuid`` (pi: ``parentId``) links is joined across it,
so nothing before it is lost, the report names the line, and a collapsed marker stands where it
was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coding_agent.importing.common import read_lines
from coding_agent.importing.store import import_file, import_report, read_session_file

BASE = {"isSidechain": False, "userType": "external", "sessionId": "s", "version": "2.1.75"}


def row(uuid: str, parent: str | None, kind: str, content: Any, **more: Any) -> dict[str, Any]:
    """A line as Claude Code writes it: ``parentUuid`` first, ``uuid`` after the message."""
    message: dict[str, Any] = {"role": "assistant" if kind == "assistant" else "user"}
    if kind == "assistant":
        message |= {"id": f"msg_{uuid}", "model": "claude-opus-4-6", "type": "message"}
    message["content"] = content
    return {"parentUuid": parent, **BASE, "type": kind, "message": message, "uuid": uuid,
            "timestamp": f"2026-03-01T10:00:{len(uuid):02d}.000Z", **more}  # fmt: skip


def said(uuid: str, parent: str | None, text: str) -> dict[str, Any]:
    return row(uuid, parent, "user", text)


def answered(uuid: str, parent: str | None, text: str) -> dict[str, Any]:
    return row(uuid, parent, "assistant", [{"type": "text", "text": text}])


def write(path: Path, lines: list[dict[str, Any] | bytes]) -> Path:
    path.write_bytes(
        b"".join(
            (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n"
            for line in lines
        )
    )
    return path


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = " ".join(
                block.get("text", "") if block["type"] == "text" else f"<{block['type']}>"
                for block in content
            )
        out.append((message["role"], content))
    return out


def test_a_bad_json_line_in_the_middle_is_bridged_and_named(tmp_path: Path) -> None:
    """Line 4 was cut off mid-write (a crash) and the session went on after it: line 5's parent
    is line 4's uuid, which is lost with it. The chain goes on from the ``parentUuid`` line 4
    still names (line 3); lines 6 and 7, both garbled, are joined across the same way, the
    one naming nothing from the line before it."""
    source = write(
        tmp_path / "s.jsonl",
        [
            {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
            said("u1", None, "fix the flaky test"),
            answered("a1", "u1", "It sleeps."),
            b'{"parentUuid": "a1", "isSidechain": false, "type": "user", "message": {"ro',
            said("u2", "u-lost", "remove the sleep"),
            b"\x00\x00\x00 not json at all",
            b'{"parentUuid": "x-lost", "type": "assistant", "message": {"content": "Do',
            answered("a2", "y-lost", "Removed; it passes."),
        ],
    )
    session = read_session_file(source)
    assert texts(session.messages) == [
        ("user", "fix the flaky test"),
        ("assistant", "It sleeps."),
        (
            "user",
            "[1 line of the file could not be read here: line 4 (not JSON) of the Claude Code "
            "session file; what it held is not in this conversation]",
        ),
        ("user", "remove the sleep"),
        (
            "user",
            "[2 lines of the file could not be read here: lines 6, 7 of the Claude Code "
            "session file; what they held is not in this conversation]",
        ),
        ("assistant", "Removed; it passes."),
    ]
    assert session.shown == {
        2: {"meta": "1 line of the file could not be read here"},
        4: {"meta": "2 lines of the file could not be read here"},
    }
    stored = import_file(session, cwd=tmp_path, env={"XDG_STATE_HOME": str(tmp_path / "state")})
    report = import_report(session, stored)
    assert report[0].startswith("Imported 6 messages of Claude Code session s into session")
    assert report[1:] == [
        "  skipped 3 line(s) that are not whole JSON",
        "  the conversation was joined across line 4 (not JSON), which could not be read: "
        "line 5 follows line 3",
        "  the conversation was joined across lines 6, 7, which could not be read: "
        "line 8 follows line 5",
        "  it ran on anthropic/claude-opus-4-6 there; here it continues on the model you start "
        "it with (--model provider/id)",
    ]


def test_a_line_over_the_limit_in_the_middle_is_bridged_and_named(tmp_path: Path) -> None:
    """The result of reading a big file is the line over the limit: its uuid, after the
    message, is still found as the line streams past, so the answer after it follows the
    call before it; the call gets the error result an import gives a call without one."""
    call = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/p/big.log"}}
    huge = "x" * 5000
    source = write(
        tmp_path / "s.jsonl",
        [
            said("u1", None, "read the log"),
            row("a1", "u1", "assistant", [call]),
            {"parentUuid": "a1", "isSidechain": False, "type": "progress",
             "data": {"type": "hook_progress", "hookEvent": "PostToolUse"}, "uuid": "p1",
             "sessionId": "s"},
            row("r1", "p1", "user", [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": huge}], toolUseResult={"file": huge}),
            answered("a2", "r1", "The log is long; the error is at the end."),
            said("u2", "a2", "fix it"),
        ],
    )  # fmt: skip
    session = read_session_file(source, line_limit=2000)
    assert texts(session.messages) == [
        ("user", "read the log"),
        ("assistant", "<toolCall>"),
        ("toolResult", "(the result of this call was not in the imported session)"),
        (
            "user",
            "[1 line of the file could not be read here: line 4 (longer than a line may be) of "
            "the Claude Code session file; what it held is not in this conversation]",
        ),
        ("assistant", "The log is long; the error is at the end."),
        ("user", "fix it"),
    ]
    assert session.shown == {3: {"meta": "1 line of the file could not be read here"}}
    size = len(source.read_bytes().splitlines()[3])
    assert session.notes[:2] == [
        f"skipped line 4: {size} bytes is longer than a line may be (2000 bytes)",
        "the conversation was joined across line 4 (longer than a line may be), which could "
        "not be read: line 5 follows line 3",
    ]


def test_progress_lines_in_the_chain_are_followed(tmp_path: Path) -> None:
    """Claude Code 2.1 links the conversation through its ``progress`` lines (a hook ran): the
    line after one names it as its parent; the import goes through it, and shows nothing."""
    source = write(
        tmp_path / "s.jsonl",
        [
            {"parentUuid": None, "isSidechain": False, "type": "progress",
             "data": {"type": "hook_progress", "hookEvent": "SessionStart"}, "uuid": "p0",
             "sessionId": "s"},
            said("u1", "p0", "hello"),
            answered("a1", "u1", "Hi."),
            {"parentUuid": "a1", "isSidechain": False, "type": "progress",
             "data": {"type": "hook_progress", "hookEvent": "Stop"}, "uuid": "p1",
             "sessionId": "s"},
            said("u2", "p1", "and now?"),
        ],
    )  # fmt: skip
    session = read_session_file(source)
    assert texts(session.messages) == [
        ("user", "hello"),
        ("assistant", "Hi."),
        ("user", "and now?"),
    ]
    assert session.notes == []


def test_a_parent_missing_for_no_unread_line_stops_the_chain_as_before(tmp_path: Path) -> None:
    """A parent that is nowhere in the file (its start is missing; a fork whose parent lives in
    another file; Claude Code's own dangling links), and an unread line that is not just
    before the line missing its parent: the chain stops there, as Claude Code's ``--resume``
    does, and nothing is bridged (what came after an unrelated unread line is no history)."""
    source = write(
        tmp_path / "s.jsonl",
        [
            said("u1", None, "first"),
            b"not json",
            answered("a1", "u1", "One."),
            said("u2", "elsewhere", "second"),
            answered("a2", "u2", "Two."),
        ],
    )
    session = read_session_file(source)
    assert texts(session.messages) == [("user", "second"), ("assistant", "Two.")]
    assert session.shown == {}
    assert session.notes == []
    assert session.skipped_lines == 1


def test_an_unread_line_names_its_uuid_though_it_is_split_between_pieces(tmp_path: Path) -> None:
    """A long line is never held whole: its ``uuid`` is found as it streams past in pieces of
    1 MB, also when the value is split between two of them."""
    head = b'{"parentUuid": "a1", "type": "user", "message": {"content": "'
    tail = b'"}, "uuid": "r1-split", "timestamp": "2026-03-01T10:00:00Z"}'
    filler = 1024 * 1024 - len(head) - tail.index(b"r1-split") - 3  # the boundary in the value
    source = tmp_path / "s.jsonl"
    source.write_bytes(head + b"x" * filler + tail + b"\n" + b"[1]\n")
    lines = read_lines(source, line_limit=1000)
    assert lines.records == [] and lines.skipped == 1  # [1] is no record: counted, not unread
    (unread,) = lines.unread
    assert (unread.number, unread.too_long) == (1, len(head) + filler + len(tail))
    assert unread.named == {"uuid": frozenset({"r1-split"}), "parentUuid": frozenset({"a1"})}
    assert unread.first_named == {"parentUuid": "a1", "uuid": "r1-split"}


def test_an_unread_first_line_is_marked_where_the_conversation_began(tmp_path: Path) -> None:
    """The unread line names ``"parentUuid": null``: it began the conversation (or a
    compaction), so nothing before it is looked for; the marker and the report say it."""
    source = write(
        tmp_path / "s.jsonl",
        [
            b'{"parentUuid": null, "isSidechain": false, "type": "user", "message": {"conte',
            answered("a1", "u-lost", "Done."),
        ],
    )
    session = read_session_file(source)
    assert [role for role, _ in texts(session.messages)] == ["user", "assistant"]
    assert session.shown == {0: {"meta": "1 line of the file could not be read here"}}
    assert session.notes == [
        "the conversation reaches line 1 (not JSON), which could not be read: it is imported "
        "from line 2 on"
    ]


def test_a_garbled_file_is_joined_across_every_line_and_the_report_stays_short(
    tmp_path: Path,
) -> None:
    """Every other line garbled: every message is imported, each gap marked, and the report
    names the first ten gaps and counts the rest."""
    lines: list[dict[str, Any] | bytes] = []
    for index in range(12):
        lines.append(said(f"u{index}", f"lost{index - 1}" if index else None, f"prompt {index}"))
        lines.append(b"garbled")
    session = read_session_file(write(tmp_path / "s.jsonl", lines))
    prompts = [text for role, text in texts(session.messages) if not text.startswith("[")]
    assert prompts == [f"prompt {index}" for index in range(12)]
    assert len(session.shown) == 11
    assert session.notes[0] == (
        "the conversation was joined across line 2 (not JSON), which could not be read: "
        "line 3 follows line 1"
    )
    assert session.notes[10:] == [
        "the conversation was joined across 1 more line(s) that could not be read, from line 22 on"
    ]


# pi: a header line, then entries written ``type``, ``id``, ``parentId``, ``timestamp`` first

PI_HEADER = {"type": "session", "version": 3, "id": "pi-s", "timestamp": "2026-03-01T10:00:00Z",
             "cwd": "/home/dev/src/shop"}  # fmt: skip


def entry(
    entry_id: str, parent: str | None, role: str, content: Any, **more: Any
) -> dict[str, Any]:
    """A ``message`` entry as pi's session manager appends it."""
    message: dict[str, Any] = {"role": role, "content": content, **more}
    if role == "assistant":
        message |= {"provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "stop"}
    return {"type": "message", "id": entry_id, "parentId": parent,
            "timestamp": f"2026-03-01T10:01:{len(entry_id):02d}.000Z", "message": message}  # fmt: skip


def pi_said(entry_id: str, parent: str | None, text: str) -> dict[str, Any]:
    return entry(entry_id, parent, "user", text)


def pi_answered(entry_id: str, parent: str | None, text: str) -> dict[str, Any]:
    return entry(entry_id, parent, "assistant", [{"type": "text", "text": text}])


def test_a_pi_line_that_is_not_json_in_the_middle_is_bridged_and_named(tmp_path: Path) -> None:
    """Line 5 is an entry cut off mid-write with the next entry appended to it (no newline came
    between): the line names the whole entry's id, so line 6, its child, follows the
    ``parentId`` the line names first (line 4). Line 7 is garbled past reading any id: line 8's
    parent is lost with it, and the chain goes on from the line before it. Every readable
    message is imported in order, a marker where each unread line was."""
    cut = b'{"type": "message", "id": "u2", "parentId": "a1", "timestamp": "2026-03-01T10:01:0'
    source = write(
        tmp_path / "s.jsonl",
        [
            PI_HEADER,
            {"type": "model_change", "id": "m1", "parentId": None,
             "timestamp": "2026-03-01T10:00:00Z", "provider": "anthropic",
             "modelId": "claude-sonnet-4-5"},
            pi_said("u1", "m1", "fix the flaky test"),
            pi_answered("a1", "u1", "It sleeps."),
            cut + json.dumps(pi_said("u3", "a1", "remove the sleep")).encode(),
            pi_answered("a2", "u3", "Removed; it passes."),
            b"\x00\x00\x00 not json at all",
            pi_said("u4", "x-lost", "now run the suite"),
            pi_answered("a3", "u4", "All green."),
        ],
    )  # fmt: skip
    session = read_session_file(source)
    assert texts(session.messages) == [
        ("user", "fix the flaky test"),
        ("assistant", "It sleeps."),
        (
            "user",
            "[1 line of the file could not be read here: line 5 (not JSON) of the pi session "
            "file; what it held is not in this conversation]",
        ),
        ("assistant", "Removed; it passes."),
        (
            "user",
            "[1 line of the file could not be read here: line 7 (not JSON) of the pi session "
            "file; what it held is not in this conversation]",
        ),
        ("user", "now run the suite"),
        ("assistant", "All green."),
    ]
    assert session.shown == {
        2: {"meta": "1 line of the file could not be read here"},
        4: {"meta": "1 line of the file could not be read here"},
    }
    stored = import_file(session, cwd=tmp_path, env={"XDG_STATE_HOME": str(tmp_path / "state")})
    report = import_report(session, stored)
    assert report[0].startswith("Imported 7 messages of pi session pi-s into session")
    assert report[1:] == [
        "  skipped 2 line(s) that are not whole JSON",
        "  the conversation was joined across line 5 (not JSON), which could not be read: "
        "line 6 follows line 4",
        "  the conversation was joined across line 7 (not JSON), which could not be read: "
        "line 8 follows line 6",
        "  it ran on anthropic/claude-sonnet-4-5 there; here it continues on the model you start "
        "it with (--model provider/id)",
    ]


def test_a_pi_line_over_the_limit_in_the_middle_is_bridged_and_named(tmp_path: Path) -> None:
    """The result of reading a big file is the line over the limit: pi writes its ``id`` and
    ``parentId`` first, found as the line streams past, so the answer after it follows the
    call before it; the call gets the error result an import gives a call without one."""
    call = {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "/p/big.log"}}
    result = entry("r1", "a1", "toolResult", [{"type": "text", "text": "x" * 5000}],
                   toolCallId="t1", toolName="read", isError=False)  # fmt: skip
    source = write(
        tmp_path / "s.jsonl",
        [
            PI_HEADER,
            pi_said("u1", None, "read the log"),
            entry("a1", "u1", "assistant", [call]),
            result,
            pi_answered("a2", "r1", "The log is long; the error is at the end."),
            pi_said("u2", "a2", "fix it"),
        ],
    )
    session = read_session_file(source, line_limit=2000)
    assert texts(session.messages) == [
        ("user", "read the log"),
        ("assistant", "<toolCall>"),
        ("toolResult", "(the result of this call was not in the imported session)"),
        (
            "user",
            "[1 line of the file could not be read here: line 4 (longer than a line may be) of "
            "the pi session file; what it held is not in this conversation]",
        ),
        ("assistant", "The log is long; the error is at the end."),
        ("user", "fix it"),
    ]
    assert session.shown == {3: {"meta": "1 line of the file could not be read here"}}
    size = len(source.read_bytes().splitlines()[3])
    assert session.notes == [
        f"skipped line 4: {size} bytes is longer than a line may be (2000 bytes)",
        "the conversation was joined across line 4 (longer than a line may be), which could "
        "not be read: line 5 follows line 3",
    ]


def test_a_pi_compaction_keeping_an_unread_line_keeps_what_follows_it(tmp_path: Path) -> None:
    """pi's compaction names the first entry it kept, here the line that cannot be read: the
    summary, then the marker and what was kept after it, then what came after the compaction
    (before, the kept answer was counted as summarized and dropped)."""
    source = write(
        tmp_path / "s.jsonl",
        [
            PI_HEADER,
            pi_said("u1", None, "old prompt"),
            pi_answered("a1", "u1", "Old answer."),
            b'{"type": "message", "id": "k1", "parentId": "a1", "timestamp": "2026-03-01T10:0',
            pi_answered("k2", "k1", "Kept answer."),
            {"type": "compaction", "id": "c1", "parentId": "k2",
             "timestamp": "2026-03-01T10:05:00Z", "summary": "The user asked old things.",
             "firstKeptEntryId": "k1", "tokensBefore": 1000},
            pi_said("u3", "c1", "go on"),
        ],
    )  # fmt: skip
    session = read_session_file(source)
    assert [text[:40] for _, text in texts(session.messages)] == [
        "The conversation before this point was c",
        "[1 line of the file could not be read he",
        "Kept answer.",
        "go on",
    ]
    assert session.notes == [
        "the conversation was joined across line 4 (not JSON), which could not be read: "
        "line 5 follows line 3",
        "2 message(s) before pi's compaction are imported as its summary, as pi sent them",
    ]


def test_a_pi_parent_missing_for_no_unread_line_stops_the_chain_as_before(
    tmp_path: Path,
) -> None:
    """An entry whose parent is nowhere in the file (its start is missing, a parent in another
    file), and an unread line that is not just before it: the chain stops there and the
    history is imported from that entry on, as pi's own ``--resume`` does; nothing is bridged."""
    source = write(
        tmp_path / "s.jsonl",
        [
            PI_HEADER,
            pi_said("u1", None, "first"),
            b"not json",
            pi_answered("a1", "u1", "One."),
            pi_said("u2", "elsewhere", "second"),
            pi_answered("a2", "u2", "Two."),
        ],
    )
    session = read_session_file(source)
    assert texts(session.messages) == [("user", "second"), ("assistant", "Two.")]
    assert session.shown == {}
    assert session.notes == []
    assert session.skipped_lines == 1
