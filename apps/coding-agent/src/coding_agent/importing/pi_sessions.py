"""pi's session files, read for an import.

pi keeps a session as ``~/.pi/agent/sessions/--<cwd, / as ->--/<time>_<id>.jsonl``
(``$PI_CODING_AGENT_DIR`` moves ``~/.pi/agent``): one JSON object a line.

* The first line is the header: ``{"type": "session", "version": 3, "id", "timestamp",
  "cwd", "parentSession"?}``. A header without ``version`` is version 1; this reader takes
  versions 1 to 3 (:data:`SUPPORTED_VERSIONS`) and refuses another, naming it.
* Every other line is an entry ``{"type", "id", "parentId", "timestamp", …}``. Since version 2
  the entries are a tree: ``parentId`` names the entry before (``null`` for the first), and a
  branch (``/tree``, ``/fork``) is a new child of an earlier entry. The conversation pi
  continues is the path from the *last* entry of the file back to the root, and that is the
  branch imported. Version 1 files have no ids: the entries are one line, in file order.
* ``message`` entries carry ``message``, an agent message: ``user`` (``content`` a string or
  text/image blocks), ``assistant`` (``content`` of ``text``, ``thinking`` — with
  ``thinkingSignature`` and ``redacted`` — and ``toolCall`` blocks ``{id, name, arguments}``;
  ``provider``, ``model``, ``stopReason``), ``toolResult`` (``toolCallId``, ``toolName``,
  ``content``, ``isError``, ``details``), ``bashExecution`` (a ``!`` command the user ran:
  ``command``, ``output``, ``exitCode``, ``cancelled``, ``excludeFromContext`` for ``!!``),
  ``custom`` (an extension's message, read by the model as a user message; ``hookMessage``
  before version 3), ``branchSummary`` and ``compactionSummary``.
* ``compaction`` entries (``summary``, ``firstKeptEntryId``): on the path, the model read the
  summary, then the entries from ``firstKeptEntryId`` to the compaction, then those after it;
  the import keeps the same. ``branch_summary`` (``summary``) and ``custom_message``
  (``content``) entries are read as user messages, as pi sends them (a summary labelled
  ``compaction summary`` or ``branch summary``: shown collapsed, as pi does).
* ``model_change``, ``thinking_level_change``, ``label`` and ``custom`` entries are not part
  of the conversation and are not imported; the last ``session_info`` entry's ``name``
  (``/name``) names the new session.

A line that cannot be read (not JSON: cut off by a crash, garbled, or two entries run together
when pi appended after a line cut off without its newline; or longer than the line limit) does
not cut the history before it off. pi itself skips such a line and follows ``parentId`` from
the last entry only until a parent is not there; the import joins the chain across it, as for
Claude Code (:mod:`~coding_agent.importing.chain`): the unread line is the one whose bytes name
``"id": parent`` (pi writes ``id`` and ``parentId`` first, so a line cut off or over the limit
still names them), or else the line just before, naming no id; the chain goes on from the
``parentId`` its bytes name, else from the line before it. The report names the line (``the
conversation was joined across line 7 (not JSON), which could not be read: line 8 follows line
6``) and a user message stands where it was, shown as one collapsed line, ``1 line of the file
could not be read here``, telling the model that something is missing there (none where pi's
compaction summarized it: the model read the summary there). A parent missing for no unread
line (a file whose start is missing, an entry whose parent is in another file) ends the chain
there, the history imported from that entry on, as pi's own ``--resume`` does. A version 1
file has no links: a line that cannot be read there is skipped and counted.

An assistant message that ended in ``error`` or ``aborted`` with nothing in it is left out (the
model never said it). pi's tools have our names and arguments, so a call of ``bash``,
``read``, … stays a tool call; a result's ``details`` (pi's own display data) are not kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

__all__ = ["SUPPORTED_VERSIONS", "looks_like_pi", "read_pi_session"]

SUPPORTED_VERSIONS = (1, 2, 3)
"""The header versions this reader knows (pi's ``CURRENT_SESSION_VERSION`` is 3)."""

TOOL = "pi"

LINKS = Links(id="id", parent="parentId", agent="pi")
"""How pi links its entries (:mod:`~coding_agent.importing.chain`)."""


def looks_like_pi(lines: SourceLines) -> bool:
    """Whether the file's first object is a pi session header."""
    first = lines.records[0] if lines.records else {}
    return first.get("type") == "session" and "cwd" in first and "id" in first


def read_pi_session(path: Path, lines: SourceLines) -> ImportedSession:
    """The conversation of pi's session file ``path`` (its lines already read)."""
    header = lines.records[0]
    version = header.get("version", 1)
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
        raise ImportProblem(
            f"{path}: pi session format version {version!r} is not one this agent reads "
            f"(it reads versions {supported}); update coding-agent, or export the session "
            "from pi to an older format"
        )
    numbered = [
        (number, e)
        for number, e in zip(lines.numbers[1:], lines.records[1:], strict=True)
        if isinstance(e.get("type"), str)
    ]
    entries = [e for _, e in numbered]
    path_entries: list[dict[str, Any] | Bridge] = list(entries)
    bridges: list[Bridge] = []
    if version >= 2:
        linked = [(n, e) for n, e in numbered if isinstance(e.get("id"), str)]
        leaf = len(linked) - 1 if linked else None  # the last entry, as pi's leaf
        path_entries, bridges = branch(linked, lines.unread, LINKS, leaf)
    session = ImportedSession(
        tool=TOOL,
        source=path,
        cwd=Path(header["cwd"]) if isinstance(header.get("cwd"), str) and header["cwd"] else None,
        source_id=str(header.get("id")),
        messages=[],
        skipped_lines=lines.skipped,
        truncated_tail=lines.truncated_tail,
        notes=lines.notes(),
    )
    stamp = millis(header.get("timestamp"))
    if stamp:
        from datetime import UTC, datetime

        session.started = datetime.fromtimestamp(stamp / 1000, UTC)
    session.notes += bridge_notes(bridges)
    messages: list[dict[str, Any]] = []
    compaction = next(
        (
            e
            for e in reversed(path_entries)
            if not isinstance(e, Bridge) and e["type"] == "compaction"
        ),
        None,
    )
    if compaction is not None:
        at = path_entries.index(compaction)
        messages.append(_summary(str(compaction.get("summary", "")), compaction, "compaction"))
        kept = compaction.get("firstKeptEntryId")
        keep = False
        summarized = 0
        for entry in path_entries[:at]:
            if isinstance(entry, Bridge):  # an unread line was the first kept: from its marker
                keep = keep or (isinstance(kept, str) and entry.names(kept))
            else:
                keep = keep or entry.get("id") == kept
            if keep:
                messages.extend(_messages(entry, session))
            elif not isinstance(entry, Bridge) and entry["type"] == "message":
                summarized += 1
        for entry in path_entries[at + 1 :]:
            messages.extend(_messages(entry, session))
        if summarized:
            session.notes.append(
                f"{summarized} message(s) before pi's compaction are imported as its summary, "
                "as pi sent them"
            )
    else:
        for entry in path_entries:
            messages.extend(_messages(entry, session))
    named = [e.get("name") for e in entries if e["type"] == "session_info"]
    session.name = named[-1] if named and isinstance(named[-1], str) else ""
    session.first_prompt = first_line(
        text_of(e["message"].get("content"))
        for e in entries
        if e["type"] == "message"
        and isinstance(e.get("message"), dict)
        and e["message"].get("role") == "user"
    )
    session.messages, session.shown, orphans = finish_messages(messages)
    if orphans:
        session.notes.append(f"{orphans} tool result(s) without their call are kept as text")
    return session


def _summary(summary: str, entry: dict[str, Any], what: str) -> dict[str, Any]:
    heading = (
        "The conversation before this point was compacted into this summary"
        if what == "compaction"
        else "A summary of a branch this conversation came back from"
    )
    message = {
        "role": "user",
        "content": f"{heading}:\n\n<summary>\n{summary}\n</summary>",
        "timestamp": millis(entry.get("timestamp")),
    }
    return mark_shown(message, meta=f"{what} summary")  # pi shows it collapsed too


def _messages(entry: dict[str, Any] | Bridge, session: ImportedSession) -> list[dict[str, Any]]:
    """Our messages for one entry of the path (none for one the model never read; the marker
    for a bridge across lines that could not be read)."""
    if isinstance(entry, Bridge):
        return [entry.marker()]
    kind = entry["type"]
    if kind == "branch_summary" and entry.get("summary"):
        return [_summary(str(entry["summary"]), entry, "branch")]
    if kind == "custom_message":
        return [_user(entry.get("content"), millis(entry.get("timestamp")))]
    if kind != "message" or not isinstance(entry.get("message"), dict):
        return []
    message: dict[str, Any] = entry["message"]
    role = message.get("role")
    stamp = millis(message.get("timestamp")) or millis(entry.get("timestamp"))
    if role == "user" or role in ("custom", "hookMessage"):
        return [_user(message.get("content"), stamp)]
    if role == "assistant":
        return _assistant(message, stamp, session)
    if role == "toolResult":
        name = str(message.get("toolName", ""))
        content = _blocks(message.get("content"))
        if name not in OUR_TOOLS:
            text = unknown_result_text(name, text_of(content), bool(message.get("isError")))
            return [late_user_text(text, stamp)]
        result: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": str(message.get("toolCallId", "")),
            "toolName": name,
            "content": content,
            "isError": bool(message.get("isError")),
            "timestamp": stamp,
        }
        return [result]
    if role == "bashExecution" and not message.get("excludeFromContext"):
        return [_user(_bash_text(message), stamp)]
    if role in ("branchSummary", "compactionSummary"):
        what = "branch" if role == "branchSummary" else "compaction"
        return [_summary(str(message.get("summary", "")), entry, what)]
    return []


def _assistant(
    message: dict[str, Any], stamp: int, session: ImportedSession
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if kind == "text" and isinstance(block.get("text"), str):  # pyright: ignore[reportUnknownMemberType]
            blocks.append({"type": "text", "text": block["text"]})
        elif kind == "thinking":
            thinking: dict[str, Any] = {
                "type": "thinking",
                "thinking": str(block.get("thinking") or ""),
            }  # pyright: ignore[reportUnknownMemberType]
            signature = block.get("thinkingSignature")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(signature, str) and signature:
                thinking["signature"] = signature
            if block.get("redacted"):  # pyright: ignore[reportUnknownMemberType]
                thinking["redacted"] = True
            blocks.append(thinking)
        elif kind == "toolCall":
            name = str(block.get("name", ""))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            arguments = block.get("arguments")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if name in OUR_TOOLS and isinstance(arguments, dict):
                blocks.append(
                    {
                        "type": "toolCall",
                        "id": str(block.get("id", "")),
                        "name": name,
                        "arguments": arguments,
                    }  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
                )
            else:
                blocks.append(unknown_call_text(name, arguments))
    if message.get("stopReason") in ("error", "aborted") and not any(
        b["type"] != "thinking" for b in blocks
    ):
        session.notes.append("an answer that failed before it said anything was left out")
        return []
    if not blocks:
        return []
    return [
        assistant_message(
            TOOL,
            blocks,
            provider=str(message.get("provider") or ""),
            model=str(message.get("model") or ""),
            timestamp=stamp,
        )
    ]


def _user(content: Any, stamp: int) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "user", "content": content, "timestamp": stamp}
    return {"role": "user", "content": _blocks(content) or "", "timestamp": stamp}


def _blocks(content: Any) -> list[dict[str, Any]]:
    """Text and image blocks, in our shape (pi's are the same: ``data``, ``mimeType``)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):  # pyright: ignore[reportUnknownMemberType]
            out.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image" and isinstance(block.get("data"), str):  # pyright: ignore[reportUnknownMemberType]
            mime = block.get("mimeType") or "image/png"  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            out.append({"type": "image", "data": block["data"], "mimeType": str(mime)})  # pyright: ignore[reportUnknownArgumentType]
    return out


def _bash_text(message: dict[str, Any]) -> str:
    output = str(message.get("output") or "")
    text = f"I ran `{message.get('command', '')}`:\n" + (
        f"```\n{output}\n```" if output else "(no output)"
    )
    code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(the command was cancelled)"
    elif isinstance(code, int) and code != 0:
        text += f"\n\nIt exited with code {code}."
    return text
