"""A Claude Code file with a line that cannot be read in the middle (not JSON, or longer than
a line may be): the chain of ``parentUuid`` links is joined across it, so nothing before it
is lost, the report names the line, and a collapsed marker stands where it was."""

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
    assert (unread.uuids, unread.parent, unread.names_parent) == (
        frozenset({"r1-split"}),
        "a1",
        True,
    )


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
