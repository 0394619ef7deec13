"""The session readers on their own: what a provider is sent of an imported conversation, and
the shapes the command-line tests do not reach (Claude Code's API errors, pi's failed answers,
version 1 files without ids)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from coding_agent.importing.common import ImportProblem, read_lines
from coding_agent.importing.store import import_file, import_report, read_session_file
from coding_agent.worker.providers.anthropic import AnthropicProvider, build_params
from pico3.models import Request, UserMessage, messages_from_json

FIXTURES = Path(__file__).parents[1] / "fixtures" / "session_imports"


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_anthropic_is_sent_imported_thinking_as_text_and_never_a_signature() -> None:
    session = read_session_file(FIXTURES / "claude_tools.jsonl")
    messages = messages_from_json(session.messages)
    model = "claude-opus-4-1"
    info = AnthropicProvider(api_key="k").model(model)
    request = Request(model=model, messages=[*messages, UserMessage(content="go on")])
    sent = build_params(request, info)["messages"]
    answer = next(m for m in sent if m["role"] == "assistant")["content"]
    # signed thinking goes as its text; redacted thinking is not sent at all
    assert answer[0] == {"type": "text", "text": "Look at the test first."}
    assert answer[1]["type"] == "tool_use"
    dumped = json.dumps(sent)
    assert "ErUBCkYIBRgCIkD" not in dumped and "EmwKAhgBEgy3va3pzix" not in dumped
    assert '"redacted_thinking"' not in dumped
    # every tool_use is answered by the next message's tool_result
    for index, message in enumerate(sent):
        calls = (
            [
                b["id"]
                for b in message["content"]
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            if isinstance(message["content"], list)
            else []
        )
        if calls:
            following = sent[index + 1]["content"]
            answered = [b["tool_use_id"] for b in following if b.get("type") == "tool_result"]
            assert answered[: len(calls)] == calls


def test_claude_code_api_errors_are_not_answers(tmp_path: Path) -> None:
    base = {"isSidechain": False, "cwd": str(tmp_path), "sessionId": "s", "version": "2.0.55"}
    source = write(tmp_path / "s.jsonl", [
        {**base, "type": "user", "uuid": "1", "parentUuid": None,
         "message": {"role": "user", "content": "hi"}},
        {**base, "type": "assistant", "uuid": "2", "parentUuid": "1", "isApiErrorMessage": True,
         "message": {"id": "x", "role": "assistant", "model": "<synthetic>",
                     "content": [{"type": "text", "text": "API Error: 529 overloaded"}]}},
        {**base, "type": "user", "uuid": "3", "parentUuid": "2",
         "message": {"role": "user", "content": "try again"}},
    ])  # fmt: skip
    session = read_session_file(source)
    assert [m["role"] for m in session.messages] == ["user", "user"]


def test_pi_version_1_is_one_line_and_failed_answers_are_left_out(tmp_path: Path) -> None:
    source = write(tmp_path / "v1.jsonl", [
        {"type": "session", "id": "old", "timestamp": "2025-06-01T10:00:00Z", "cwd": str(tmp_path)},
        {"type": "message", "timestamp": "2025-06-01T10:00:01Z",
         "message": {"role": "user", "content": "hello", "timestamp": 1}},
        {"type": "message", "timestamp": "2025-06-01T10:00:02Z",
         "message": {"role": "assistant", "content": [], "stopReason": "error",
                     "errorMessage": "overloaded", "timestamp": 2}},
        {"type": "message", "timestamp": "2025-06-01T10:00:03Z",
         "message": {"role": "hookMessage", "customType": "note", "content": "from a hook",
                     "display": True, "timestamp": 3}},
    ])  # fmt: skip
    session = read_session_file(source)
    assert [(m["role"], m["content"]) for m in session.messages] == [
        ("user", "hello"),
        ("user", "from a hook"),
    ]
    assert "an answer that failed before it said anything was left out" in session.notes


def test_a_claude_code_file_of_titles_only_has_no_conversation(tmp_path: Path) -> None:
    source = write(tmp_path / "titles.jsonl", [
        {"type": "summary", "summary": "Fix the flaky test", "leafUuid": "c-0013"},
    ])  # fmt: skip
    with pytest.raises(ImportProblem, match="the session has no conversation to import"):
        read_session_file(source)


def test_a_session_that_records_no_folder_asks_for_one(tmp_path: Path) -> None:
    source = write(tmp_path / "old.jsonl", [
        {"type": "session", "id": "old", "timestamp": "2025-06-01T10:00:00Z", "cwd": ""},
        {"type": "message", "timestamp": "2025-06-01T10:00:01Z",
         "message": {"role": "user", "content": "hello", "timestamp": 1}},
    ])  # fmt: skip
    session = read_session_file(source)
    assert session.cwd is None
    with pytest.raises(
        ImportProblem,
        match="records no project folder: name the one to continue it in with --cwd FOLDER",
    ):
        import_file(session, env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("session.json"))


def test_claude_code_context_lines_the_user_never_saw_are_kept(tmp_path: Path) -> None:
    """``isMeta`` lines were in the model's context: a slash command's expanded prompt (after
    its ``<command-name>`` line) is what the next answer replies to, so it is imported."""
    base = {"isSidechain": False, "userType": "external", "cwd": str(tmp_path)}
    base |= {"sessionId": "2ff46cd5-f4e7-4724-bb20-579dae7956ea", "version": "2.1.63"}

    def line(uuid: str, parent: str | None, kind: str, content: Any, **more: Any) -> dict[str, Any]:
        role = "assistant" if kind == "assistant" else "user"
        message: dict[str, Any] = {"role": role, "content": content}
        if kind == "assistant":
            message |= {"id": f"msg_{uuid}", "model": "claude-opus-4-6", "type": "message"}
        row = {"parentUuid": parent, **base, "type": kind, "message": message, "uuid": uuid}
        return row | {"timestamp": "2026-03-01T22:42:10.000Z", **more}

    path = write(
        tmp_path / "2ff46cd5-f4e7-4724-bb20-579dae7956ea.jsonl",
        [
            {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
            line(
                "u1",
                None,
                "user",
                "<command-name>/init</command-name>\n<command-message>init"
                "</command-message>\n<command-args></command-args>",
            ),
            line(
                "u2",
                "u1",
                "user",
                [
                    {
                        "type": "text",
                        "text": "Please analyze this codebase and create a CLAUDE.md file",
                    }
                ],
                isMeta=True,
            ),
            line(
                "a1", "u2", "assistant", [{"type": "text", "text": "Now I have a clear picture."}]
            ),
        ],
    )
    session = read_session_file(path)
    said = [(m["role"], text_of_message(m)) for m in session.messages]
    assert said == [
        (
            "user",
            "<command-name>/init</command-name>\n<command-message>init</command-message>\n"
            "<command-args></command-args>",
        ),
        ("user", "Please analyze this codebase and create a CLAUDE.md file"),
        ("assistant", "Now I have a clear picture."),
    ]


def text_of_message(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


def test_a_claude_code_session_begun_with_a_slash_command_lists_it_as_typed() -> None:
    """``import --list`` and ``/import``'s picker show a session's first prompt: when the user
    began with ``/review cart.py``, that, not the first plain text typed later."""
    session = read_session_file(FIXTURES / "claude_slash_command.jsonl")
    assert session.first_prompt == "/review cart.py"


def test_a_line_longer_than_the_limit_is_skipped_named_and_the_rest_imported(
    tmp_path: Path,
) -> None:
    """The reader holds no more than the line limit of one line (it reads in 1 MB chunks): a
    longer line, here over several chunks, is skipped and named, the lines after it imported."""
    base = {"isSidechain": False, "cwd": str(tmp_path), "sessionId": "s", "version": "2.0.55"}
    huge = "x" * (3 * 1024 * 1024)  # three chunks and more
    rows = [
        {**base, "type": "user", "uuid": "1", "parentUuid": None,
         "message": {"role": "user", "content": "read the log"}},
        {**base, "type": "assistant", "uuid": "2", "parentUuid": "1",
         "message": {"id": "a", "role": "assistant", "model": "claude-opus-4-1",
                     "content": [{"type": "text", "text": huge}]}},
        {**base, "type": "user", "uuid": "3", "parentUuid": "1",  # a branch: 2 is not in it
         "message": {"role": "user", "content": "never mind, fix the test"}},
        {**base, "type": "assistant", "uuid": "4", "parentUuid": "3",
         "message": {"id": "b", "role": "assistant", "model": "claude-opus-4-1",
                     "content": [{"type": "text", "text": "Fixed."}]}},
    ]  # fmt: skip
    source = write(tmp_path / "big.jsonl", rows)
    with source.open("ab") as file:
        file.write(b'{"type": "user", "uuid": "5", "par')  # and a cut-off last line
    long_bytes = len(json.dumps(rows[1]))

    session = read_session_file(source, line_limit=1024 * 1024)
    assert [m["content"] for m in session.messages if m["role"] == "user"] == [
        "read the log",
        "never mind, fix the test",
    ]
    assert session.messages[-1]["content"] == [{"type": "text", "text": "Fixed."}]
    assert session.skipped_lines == 1 and session.truncated_tail  # the cut-off line, as before
    stored = import_file(session, env={"XDG_STATE_HOME": str(tmp_path / "state")})
    report = import_report(session, stored)
    assert "  skipped 1 line(s) that are not whole JSON (the last one was cut off)" in report
    size = f"{round(long_bytes / 1024 / 1024, 1):g} MB"
    assert f"  skipped line 2: {size} is longer than a line may be (1 MB)" in report

    # a small limit, in bytes; the whole file read with the default limit keeps the line
    small = read_session_file(source, line_limit=2000)
    assert small.notes[0] == f"skipped line 2: {size} is longer than a line may be (2000 bytes)"
    whole = read_lines(source)  # the default limit, 64 MB
    assert whole.too_long == [] and len(whole.records) == 4


def test_a_file_bigger_than_the_limit_is_refused_naming_both_sizes(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    source.write_bytes(b"{}\n" * 1000)
    with pytest.raises(
        ImportProblem, match=r"3000 bytes is too big for a session file \(at most 2000 bytes"
    ):
        read_session_file(source, file_limit=2000)


def test_the_reader_holds_no_more_of_a_line_than_the_limit(tmp_path: Path) -> None:
    """Lines are numbered as an editor numbers them (blank ones too); a line of exactly the
    limit is read, one byte more is skipped, also as the last line; a 24 MB line read with a
    1 MB limit never costs more than a few MB."""
    source = tmp_path / "lines.jsonl"
    exact = b'{"a": "' + b"x" * 93 + b'"}'  # 102 bytes
    longer = b'{"a": "' + b"x" * 94 + b'"}'
    with source.open("wb") as file:
        file.write(exact + b"\n\n" + longer + b"\n")  # lines 1 and 3 (103 bytes)
        file.write(b'{"a": "' + b"y" * (24 * 1024 * 1024) + b'"}\n[1]\n')  # lines 4 and 5
        file.write(b'{"a": "' + b"z" * 100)  # line 6, cut off and too long
    tracemalloc.start()
    try:
        lines = read_lines(source, line_limit=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * 1024 * 1024, peak
    assert lines.too_long == [(4, 24 * 1024 * 1024 + 9)]
    assert lines.skipped == 2 and lines.truncated_tail  # [1] is not an object; line 6 cut off
    small = read_lines(source, line_limit=102)
    assert small.records == [{"a": "x" * 93}]
    assert [number for number, _ in small.too_long] == [3, 4, 6]
    assert small.skipped == 1 and not small.truncated_tail
