"""Claude Code's session files, read for an import.

Claude Code keeps a session as ``~/.claude/projects/<cwd, every character but letters and
digits as ->/<session uuid>.jsonl`` (``$CLAUDE_CONFIG_DIR`` moves ``~/.claude``); a subagent's
own transcript is an ``agent-<id>.jsonl`` beside it. One JSON object a line, no header:

* ``user`` and ``assistant`` lines carry ``uuid``, ``parentUuid`` (the line before in the
  conversation; ``null`` for the first), ``sessionId``, ``cwd``, ``version`` (Claude Code's
  own, ``2.0.55``), ``timestamp`` (ISO 8601), ``isSidechain`` and ``message``, a message in
  the Anthropic Messages API's shape: ``{"role", "content"}``, the content a string or
  ``text``, ``image`` (``source: {type: base64, media_type, data}``), ``thinking``
  (``thinking``, ``signature``), ``redacted_thinking`` (``data``), ``tool_use`` (``id``,
  ``name``, ``input``) and ``tool_result`` (``tool_use_id``, ``content``, ``is_error``) blocks.
  One API answer is often written as several ``assistant`` lines, a block each, sharing
  ``message.id``: they are one message again here.
* An ``assistant`` line with ``isApiErrorMessage: true`` is Claude Code's note of a failed
  request (``API Error: 529 …``), not an answer: skipped.
* ``isSidechain: true`` lines belong to a subagent (the Task tool's conversation), not to the
  user's: skipped. ``isMeta: true`` user lines are what Claude Code put in the model's context
  without showing it (a slash command's or skill's expanded prompt after its
  ``<command-name>`` line, a ``<local-command-caveat>``, a Stop hook's feedback, a loop's
  ``continue``): kept as user messages, since the answers after them reply to them, and
  labelled as Claude Code shows them (hidden there; here one dim, collapsed line:
  ``expanded /review prompt`` after the ``<command-name>/review</command-name>`` line the
  command wrote, ``local command caveat``, ``compaction summary``, else ``context Claude Code
  added``); the first prompt ``import --list`` shows passes over them too. A typed slash
  command's own line (``<command-name>``, ``<command-args>`` tags) is shown as typed
  (``/review cart.py``), in the transcript and as the first prompt ``import --list`` shows,
  and a local command's ``<local-command-stdout>`` line (not ``isMeta``) as the collapsed
  ``output of /model``, as Claude Code shows them.
* ``system`` lines are events. One with ``subtype: "compact_boundary"`` starts the
  conversation again after a compaction: its ``parentUuid`` is ``null`` (``logicalParentUuid``
  names the last line before), and the user line after it (``isCompactSummary: true``) holds
  the summary the model read from then on. Following ``parentUuid`` from the last line stops
  there, so the import holds the summary and what came after, as Claude Code's ``--resume``
  does.
* ``summary`` lines (``summary``, ``leafUuid``) are titles: the last one whose ``leafUuid`` is
  a line of this file (Claude Code also copies other sessions' titles in) names the new
  session. ``file-history-snapshot``, ``queue-operation`` and other types are not part of the
  conversation.

The branch imported is the one ending in the last conversation line of the file (``/rewind``
and edits of an earlier prompt make a new child of an earlier line), followed back through
every line with a ``uuid``: Claude Code 2.1 links the conversation through ``progress`` lines (a
hook ran) and ``attachment`` lines too, which are followed but not imported.

A line that cannot be read (not JSON: cut off by a crash, garbled; or longer than the line
limit) does not cut the history before it off: when the chain reaches a parent that is not in
the file, and that parent was such a line (one whose bytes name ``"uuid": parent``, or the
line just before, naming no uuid: a line cut off loses its uuid, written after the message),
the chain is joined across it, going on from the ``parentUuid`` its bytes still name, else from
the line before it (Claude Code appends each line right after its parent; the walk is
:mod:`~coding_agent.importing.chain`, pi's reader's too). The import's report
names the line and the lines joined (``the conversation was joined across line 7 (not JSON),
which could not be read: line 8 follows line 6``), and a user message stands where it was,
shown as one collapsed line, ``1 line of the file could not be read here``, and telling the
model that something is missing there. A parent missing for no unread line (a file whose start
is missing, a fork whose parent is in another file, a dangling link Claude Code wrote) ends
the chain there, as Claude Code's ``--resume`` does.

Claude Code's tools are mapped to ours by :data:`pico3.CLAUDE_CODE_TOOLS` where the job is the
same and the arguments translate (``Bash``, ``Read``, ``Write``, ``Edit``, ``MultiEdit``,
``Grep``, ``Glob``, ``LS``); the others (``Task``, ``TodoWrite``, ``WebFetch``, MCP tools)
become text.

:data:`SUPPORTED_MAJORS` are the Claude Code versions whose files this reader knows; a line
written by another major version is refused, naming it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from coding_agent.importing.chain import Bridge, Links, branch, bridge_notes
from coding_agent.importing.common import (
    OUR_TOOLS,
    ImportedSession,
    ImportProblem,
    SourceLines,
    assistant_message,
    finish_messages,
    first_line,
    late_user_text,
    mark_shown,
    millis,
    text_of,
    unknown_call_text,
    unknown_result_text,
)
from pico3 import CLAUDE_CODE_TOOLS

__all__ = ["SUPPORTED_MAJORS", "looks_like_claude_code", "read_claude_code_session"]

SUPPORTED_MAJORS = (0, 1, 2)
"""The major versions of Claude Code whose session files this reader knows."""

TOOL = "claude-code"

LINKS = Links(id="uuid", parent="parentUuid", agent="Claude Code")
"""How Claude Code links its lines (:mod:`~coding_agent.importing.chain`)."""

CONVERSATION = ("user", "assistant", "system")
"""The types of line that are the conversation (others with a ``uuid`` only link it)."""


def looks_like_claude_code(lines: SourceLines) -> bool:
    """Whether the file's lines are Claude Code's: a conversation line with ``sessionId``, or
    (a file with no conversation) a ``summary`` line naming its ``leafUuid``."""
    return any(
        (record.get("type") in ("user", "assistant") and "sessionId" in record)
        or (record.get("type") == "summary" and "leafUuid" in record)
        for record in lines.records[:200]
    )


def read_claude_code_session(path: Path, lines: SourceLines) -> ImportedSession:
    """The conversation of Claude Code's session file ``path`` (its lines already read)."""
    linked = [
        (number, r)
        for number, r in zip(lines.numbers, lines.records, strict=True)
        if isinstance(r.get("uuid"), str) and not r.get("isSidechain")
    ]
    main = [r for _, r in linked if r.get("type") in CONVERSATION]
    for record in main:
        _check_version(path, record.get("version"))
    ends = [i for i, (_, r) in enumerate(linked) if r.get("type") in CONVERSATION]
    chain, bridges = branch(linked, lines.unread, LINKS, ends[-1] if ends else None)
    chain = [r for r in chain if isinstance(r, Bridge) or r.get("type") in CONVERSATION]
    read = [r for r in chain if not isinstance(r, Bridge)]
    last = read[-1] if read else (main[-1] if main else {})
    cwd = next((r["cwd"] for r in reversed(read or main) if isinstance(r.get("cwd"), str)), "")
    session = ImportedSession(
        tool=TOOL,
        source=path,
        cwd=Path(cwd) if cwd else None,
        source_id=str(last.get("sessionId") or path.stem),
        messages=[],
        skipped_lines=lines.skipped,
        truncated_tail=lines.truncated_tail,
        notes=lines.notes(),
    )
    if read and millis(read[0].get("timestamp")):
        session.started = datetime.fromtimestamp(millis(read[0].get("timestamp")) / 1000, UTC)
    sidechains = sum(1 for r in lines.records if r.get("isSidechain"))
    if sidechains:
        session.notes.append(f"{sidechains} line(s) of subagents' conversations were left out")
    session.notes += bridge_notes(bridges)
    if read and read[0].get("subtype") == "compact_boundary":
        session.notes.append(
            "Claude Code compacted this session: the summary stands for what came before"
        )
    messages: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool_use id → Claude Code's tool name
    command = ""  # the slash command of the last user line typed, as its expansion names it
    for record in chain:
        if isinstance(record, Bridge):
            messages.append(record.marker())
        elif record.get("type") == "user":
            label = _meta_label(record, command)
            typed = None
            if label is None:  # typed by the user: a command, whose expansion may follow
                command, typed = _typed_command(record)
            messages.extend(_user(record, names, label, typed))
        elif record.get("type") == "assistant" and not record.get("isApiErrorMessage"):
            message = _assistant(record, names)
            if message is None:
                continue
            previous = messages[-1] if messages else None
            if (
                previous is not None
                and previous.get("role") == "assistant"
                and previous.get("_id") is not None
                and previous.get("_id") == message.get("_id")
            ):  # one API answer written as a line per block
                previous["content"].extend(message["content"])
                previous["stopReason"] = (
                    message["stopReason"]
                    if message["stopReason"] == "toolUse"
                    else previous["stopReason"]
                )
            else:
                messages.append(message)
    for message in messages:
        message.pop("_id", None)
    uuids = {r["uuid"] for r in main}
    titles = [
        r["summary"]
        for r in lines.records
        if r.get("type") == "summary"
        and r.get("leafUuid") in uuids
        and isinstance(r.get("summary"), str)
    ]
    session.name = titles[-1] if titles else ""
    session.first_prompt = first_line(
        _typed_command(r)[1] or _text(r)  # a slash command first: as typed (/review cart.py)
        for r in main
        if r.get("type") == "user"
        and isinstance(r.get("message"), dict)
        and not r.get("isMeta")
        and not r.get("isCompactSummary")
    )
    session.messages, session.shown, orphans = finish_messages(messages)
    if orphans:
        session.notes.append(f"{orphans} tool result(s) without their call are kept as text")
    return session


_COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)


def _text(record: dict[str, Any]) -> str:
    message = record.get("message")
    return text_of(message.get("content")) if isinstance(message, dict) else ""  # pyright: ignore[reportUnknownMemberType]


def _typed_command(record: dict[str, Any]) -> tuple[str, str | None]:
    """For a user line Claude Code wrote for a typed slash command (its ``<command-name>``
    tag): the command (``/review``) and what was typed (``/review cart.py``); else ``("",
    None)``."""
    text = _text(record)
    found = _COMMAND_NAME.search(text)
    if found is None:
        return "", None
    name = found.group(1) if found.group(1).startswith("/") else "/" + found.group(1)
    given = _COMMAND_ARGS.search(text)
    arguments = given.group(1).strip() if given is not None else ""
    return name, f"{name} {arguments}" if arguments else name


def _meta_label(record: dict[str, Any], command: str) -> str | None:
    """The label of a user line the user did not type (``None`` for one they did): the
    compaction summary, a local command's caveat or output, the expanded prompt of the slash
    command typed just before, or other context Claude Code added (a hook's feedback, a
    skill)."""
    if record.get("isCompactSummary"):
        return "compaction summary"
    text = _text(record).lstrip()
    if text.startswith(("<local-command-stdout>", "<local-command-stderr>")):
        return f"output of {command}" if command else "local command output"
    if not record.get("isMeta"):
        return None
    if text.startswith("<local-command-caveat>"):
        return "local command caveat"
    if command:
        return f"expanded {command} prompt"
    return "context Claude Code added"


def _check_version(path: Path, version: Any) -> None:
    if not isinstance(version, str) or not version:
        return  # older lines carry none
    head = version.split(".", 1)[0]
    if head.isdigit() and int(head) in SUPPORTED_MAJORS:
        return
    supported = ", ".join(f"{major}.x" for major in SUPPORTED_MAJORS)
    raise ImportProblem(
        f"{path}: written by Claude Code {version}, whose session format this agent does not "
        f"know (it reads Claude Code {supported}); update coding-agent"
    )


def _ours(name: str) -> str | None:
    """Our tool for Claude Code's ``name`` when it is one whose calls an import keeps."""
    ours = CLAUDE_CODE_TOOLS.get(name)
    return ours if ours in OUR_TOOLS else None


def _arguments(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's arguments of ``name`` as our tool's."""
    path = given.get("file_path", given.get("path"))
    if name == "Bash":
        return {"command": str(given.get("command", ""))}
    if name in ("Read", "Write"):
        out: dict[str, Any] = {"path": str(path or "")}
        for key in ("offset", "limit", "content"):
            if key in given:
                out[key] = given[key]
        return out
    if name in ("Edit", "MultiEdit"):
        edits = given.get("edits") if name == "MultiEdit" else [given]
        return {
            "path": str(path or ""),
            "edits": [
                {"oldText": str(e.get("old_string", "")), "newText": str(e.get("new_string", ""))}
                for e in (edits if isinstance(edits, list) else [])  # pyright: ignore[reportUnknownVariableType]
                if isinstance(e, dict)
            ],
        }
    if name == "Grep":
        out = {"pattern": str(given.get("pattern", ""))}
        for theirs, key in (
            ("path", "path"),
            ("glob", "glob"),
            ("-i", "ignoreCase"),
            ("-C", "context"),
        ):
            if theirs in given:
                out[key] = given[theirs]
        return out
    out = {key: given[key] for key in ("pattern", "path") if key in given}
    return out


def _assistant(record: dict[str, Any], names: dict[str, str]) -> dict[str, Any] | None:
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    blocks: list[dict[str, Any]] = []
    for block in (
        [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
    ):  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(block, dict):
            continue
        kind = block.get("type")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if kind == "text" and isinstance(block.get("text"), str) and block["text"]:  # pyright: ignore[reportUnknownMemberType]
            blocks.append({"type": "text", "text": block["text"]})
        elif kind == "thinking":
            thinking: dict[str, Any] = {
                "type": "thinking",
                "thinking": str(block.get("thinking") or ""),
            }  # pyright: ignore[reportUnknownMemberType]
            if isinstance(block.get("signature"), str) and block["signature"]:  # pyright: ignore[reportUnknownMemberType]
                thinking["signature"] = block["signature"]
            blocks.append(thinking)
        elif kind == "redacted_thinking":  # readable by nobody: kept, never sent
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": "",
                    "signature": str(block.get("data") or ""),
                    "redacted": True,
                }
            )  # pyright: ignore[reportUnknownMemberType]
        elif kind == "tool_use":
            name = str(block.get("name", ""))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            call_id = str(block.get("id", ""))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            raw = block.get("input")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            given = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
            names[call_id] = name
            ours = _ours(name)
            if ours is None:
                blocks.append(unknown_call_text(name, given))
            else:
                blocks.append(
                    {
                        "type": "toolCall",
                        "id": call_id,
                        "name": ours,
                        "arguments": _arguments(name, given),
                    }
                )  # pyright: ignore[reportUnknownArgumentType]
    if not blocks:
        return None
    out = assistant_message(
        TOOL,
        blocks,
        provider="anthropic",
        model=str(message.get("model") or ""),  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        timestamp=millis(record.get("timestamp")),
    )
    out["_id"] = message.get("id")  # pyright: ignore[reportUnknownMemberType]
    return out


def _user(
    record: dict[str, Any], names: dict[str, str], label: str | None, typed: str | None
) -> list[dict[str, Any]]:
    """The messages of a user line: its tool results, then what it says (marked with ``label``
    when the user did not type it, :func:`_meta_label`; with ``typed``, the command they
    typed, :func:`_typed_command`)."""
    message = record.get("message")
    if not isinstance(message, dict):
        return []
    stamp = millis(record.get("timestamp"))
    content = message.get("content")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(content, str):
        if not content:
            return []
        text = {"role": "user", "content": content, "timestamp": stamp}
        return [mark_shown(text, meta=label, typed=typed)]
    out: list[dict[str, Any]] = []
    said: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":  # pyright: ignore[reportUnknownMemberType]
            call_id = str(block.get("tool_use_id", ""))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            name = names.get(call_id, "tool")
            result = _content(block.get("content"))  # pyright: ignore[reportUnknownMemberType]
            error = bool(block.get("is_error"))  # pyright: ignore[reportUnknownMemberType]
            ours = _ours(name)
            if ours is None:
                out.append(late_user_text(unknown_result_text(name, text_of(result), error), stamp))
            else:
                out.append(
                    {
                        "role": "toolResult",
                        "toolCallId": call_id,
                        "toolName": ours,
                        "content": result,
                        "isError": error,
                        "timestamp": stamp,
                    }
                )
        else:
            said.extend(_content([block]))
    if said:
        said_message = {"role": "user", "content": said, "timestamp": stamp}
        out.append(mark_shown(said_message, meta=label, typed=typed))
    return out


def _content(content: Any) -> list[dict[str, Any]]:
    """Text and image blocks in our shape (an image's base64 ``source`` as ``data``)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):  # pyright: ignore[reportUnknownMemberType]
            out.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image":  # pyright: ignore[reportUnknownMemberType]
            source = block.get("source")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(source, dict) and isinstance(source.get("data"), str):  # pyright: ignore[reportUnknownMemberType]
                mime = str(source.get("media_type") or "image/png")  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
                out.append({"type": "image", "data": source["data"], "mimeType": mime})
    return out
