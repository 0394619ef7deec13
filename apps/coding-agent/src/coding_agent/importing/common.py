"""What both session readers share: reading a JSONL file line by line, the imported session,
and turning another agent's tool calls into ours.

A reader (:mod:`~coding_agent.importing.pi_sessions`,
:mod:`~coding_agent.importing.claude_code_sessions`) turns a session file into an
:class:`ImportedSession`: its project folder, and its conversation as *our* model messages
(the JSON shapes of :mod:`pico3.models`: ``user``, ``assistant``, ``toolResult``), oldest first.
What the model read in the other agent is what it reads here:

* a call of one of our tools (``bash``, ``read``, ``write``, ``edit``, ``grep``, ``find``,
  ``ls``) stays a tool call, its arguments renamed to ours, with its result as a ``toolResult``;
* a call of any other tool (a subagent, a todo list, an MCP tool) becomes text in the
  assistant's message, ``[tool call NAME: {arguments}]``, and its result a user message
  ``[result of NAME: …]``, after the results of the same answer's calls of our tools;
* thinking is kept, but every imported assistant message has the ``api``
  ``import:<tool>``: no provider adapter treats its signatures as its own, so signed thinking
  is never sent back as thinking (an adapter sends it as text, or leaves it out) and redacted
  thinking is never sent at all;
* a user message the user did not type there (Claude Code's ``isMeta`` lines: a slash
  command's expanded prompt, a local command's caveat; a local command's output; a compaction
  summary of either agent) is kept as it is, since the answers after it reply to it, and
  labelled: its entry's ``data.meta`` (:class:`pico3.UserData`) tells the TUI, the web page and
  ``--json`` readers to show the label in its place, dim and collapsed, as the other agent did;
  and a slash command the user typed, which Claude Code writes as ``<command-name>`` tags, has
  ``data.typed``, the command as typed (``/review cart.py``), shown instead of the tags
  (:attr:`ImportedSession.shown`).

The source file is only ever read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

__all__ = [
    "FILE_LIMIT",
    "LINE_LIMIT",
    "LINK_KEYS",
    "OUR_TOOLS",
    "ImportProblem",
    "ImportedSession",
    "SourceLines",
    "UnreadLine",
    "assistant_message",
    "finish_messages",
    "first_line",
    "late_user_text",
    "mark_shown",
    "millis",
    "read_lines",
    "text_of",
    "unknown_call_text",
    "unknown_result_text",
]

OUR_TOOLS = frozenset({"bash", "read", "write", "edit", "grep", "find", "ls"})
"""The tools whose calls an import keeps as tool calls (every agent has them)."""

LINE_LIMIT = 64 * 1024 * 1024
"""The longest line read (a tool result holding a big file is long; a binary file is not JSONL).
A longer line is skipped, never held whole: :func:`read_lines` reads the file in chunks."""

FILE_LIMIT = 4 * LINE_LIMIT
"""The biggest session file read (256 MB)."""

_CHUNK = 1024 * 1024
"""How much of the file :func:`read_lines` reads at a time."""


class ImportProblem(Exception):
    """The file cannot be imported; the message names the file, what is wrong and what to do."""


LINK_KEYS = frozenset({"uuid", "parentUuid", "id", "parentId"})
"""The keys that link a session file's lines into a chain, looked for in a line that cannot be
read (:class:`UnreadLine`): Claude Code's ``uuid`` and ``parentUuid``, pi's ``id`` and
``parentId``."""


@dataclass(frozen=True)
class UnreadLine:
    """A line of the file that could not be read (not JSON, or too long), and what can still be
    told of it: the values of the :data:`LINK_KEYS` its bytes name, found by pattern as they
    streamed past (a line cut off in a crash still names the keys written before the cut:
    Claude Code's ``parentUuid``, its first key, but not its ``uuid``, written after the
    message; pi's ``id`` and ``parentId``, written first). A reader whose chain of parent links
    reaches a line that is not there bridges the gap with them
    (:mod:`~coding_agent.importing.chain`)."""

    number: int
    """The line's number, from 1, as an editor numbers them."""
    too_long: int = 0
    """Its length in bytes when it was skipped for being longer than the limit, else 0."""
    named: Mapping[str, frozenset[str]] = field(default_factory=dict[str, frozenset[str]])
    """Every value each link key names in the line (``{"uuid": {"u7"}}``: its own, unless it
    was cut off before it, and any a value nested in it names)."""
    first_named: Mapping[str, str | None] = field(default_factory=dict[str, str | None])
    """The first value each link key names (``None``: ``null``); a key it never names is
    absent."""

    @property
    def why(self) -> str:
        """Why it was not read, in words."""
        return "longer than a line may be" if self.too_long else "not JSON"


@dataclass
class SourceLines:
    """The JSON objects of a JSONL file, in order, and how many lines were skipped."""

    records: list[dict[str, Any]]
    skipped: int
    truncated_tail: bool
    """Whether the last line was cut off (a session being written, or a crash)."""
    line_limit: int = LINE_LIMIT
    """The longest line read; a longer one is skipped, and named in :attr:`too_long`."""
    too_long: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """The lines skipped for being longer than :attr:`line_limit`: (line number from 1, bytes)."""
    numbers: list[int] = field(default_factory=list[int])
    """The line number (from 1) of each of :attr:`records`."""
    unread: list[UnreadLine] = field(default_factory=list[UnreadLine])
    """The lines that could not be read (not JSON, or too long), in file order: those that
    may have been a record. A line of JSON that is not an object is only counted."""

    def notes(self) -> list[str]:
        """What the import says of the lines skipped for their length (one note each)."""
        limit = _size(self.line_limit)
        return [
            f"skipped line {number}: {_size(length)} is longer than a line may be ({limit})"
            for number, length in self.too_long
        ]


@dataclass
class ImportedSession:
    """A session of another agent, read: what :func:`coding_agent.importing.store.import_file`
    stores as a session of ours."""

    tool: str
    """``pi`` or ``claude-code``."""
    source: Path
    cwd: Path | None
    """The project folder the file records (``None``: it records none, as pi's oldest files)."""
    source_id: str
    messages: list[dict[str, Any]]
    skipped_lines: int = 0
    truncated_tail: bool = False
    started: datetime | None = None
    notes: list[str] = field(default_factory=list[str])
    """What was left out, in words (shown after the import)."""

    name: str = ""
    """The session's name or title there (pi's ``/name``, Claude Code's summary line), if any."""
    first_prompt: str = ""
    """The first line the user typed in the session (before any compaction, on any branch),
    what ``import --list`` shows."""
    shown: dict[int, dict[str, str]] = field(default_factory=dict[int, dict[str, str]])
    """How clients show some user messages, by index in :attr:`messages`: the entry ``data``
    ``{"meta": label}`` for one the user did not type (``expanded /review prompt``,
    ``compaction summary``), ``{"typed": text}`` for a command they typed (``/review cart.py``)."""

    @property
    def model(self) -> str:
        """``provider/model`` of the last imported answer (``""`` when none says)."""
        for message in reversed(self.messages):
            if message.get("role") == "assistant" and message.get("model"):
                provider = message.get("provider") or ""
                return f"{provider}/{message['model']}" if provider else str(message["model"])
        return ""


def read_lines(
    path: Path, *, line_limit: int = LINE_LIMIT, file_limit: int = FILE_LIMIT
) -> SourceLines:
    """The JSON objects of ``path``; a line that is not a JSON object is skipped and counted,
    and one longer than ``line_limit`` bytes is skipped and named
    (:attr:`SourceLines.too_long`): the file is read in chunks of at most 1 MB, and no more than
    ``line_limit`` bytes of a line are ever held. Raises :class:`ImportProblem` for a file that
    cannot be read or is bigger than ``file_limit`` bytes."""
    try:
        if not path.is_file():
            raise ImportProblem(f"{path}: not a file (give the path of a session's .jsonl file)")
        size = path.stat().st_size
        if size > file_limit:
            raise ImportProblem(
                f"{path}: {_size(size)} is too big for a session file "
                f"(at most {_size(file_limit)} is read)"
            )
        with path.open("rb") as file:
            return _LineSplitter(line_limit).read(path, file, file_limit)
    except OSError as error:
        raise ImportProblem(f"{path}: cannot read: {error.strerror}") from None


def _size(count: int) -> str:
    """``count`` bytes in words (``70.5 MB``, ``900 bytes``)."""
    if count < 1024 * 1024:
        return f"{count} bytes"
    return f"{round(count / (1024 * 1024), 1):g} MB"


_KEYS = b"|".join(key.encode() for key in sorted(LINK_KEYS))
_LINK = re.compile(rb'"(' + _KEYS + rb')"\s*:\s*(?:null|"([^"\\]{1,200})")')
"""A link key and its value (a string, or ``null``: group 2 is ``None``)."""
_OVERLAP = 512
"""Bytes of one piece of a long line scanned again with the next (a value split between)."""


class _Clues:
    """The values of the :data:`LINK_KEYS` named by a line that cannot be read, found as its
    bytes stream past (at most :data:`_OVERLAP` bytes held)."""

    def __init__(self) -> None:
        self.named: dict[str, set[str]] = {}
        self.first: dict[str, str | None] = {}
        self.tail = b""

    def feed(self, data: bytes | bytearray) -> None:
        """Scan the next piece of the line (not copied: it may be as long as the limit)."""
        self._scan(self.tail + bytes(data[:_OVERLAP]))  # a value split between the pieces
        self._scan(data)
        self.tail = (self.tail + bytes(data[-_OVERLAP:]))[-_OVERLAP:]

    def _scan(self, text: bytes | bytearray) -> None:
        for found in _LINK.finditer(text):
            key = found.group(1).decode()
            value = found.group(2).decode(errors="replace") if found.group(2) else None
            self.first.setdefault(key, value)
            if value is not None:
                self.named.setdefault(key, set()).add(value)

    def line(self, number: int, too_long: int = 0) -> UnreadLine:
        named = {key: frozenset(values) for key, values in self.named.items()}
        return UnreadLine(number, too_long, named, dict(self.first))


class _LineSplitter:
    """Splits a file into lines as it is read, holding at most ``limit`` bytes of one line."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.line = bytearray()
        self.over = 0  # bytes of the current line so far, once it is longer than the limit
        self.clues = _Clues()  # of the current line, once it is longer than the limit
        self.number = 1
        self.lines = SourceLines([], 0, False, line_limit=limit)

    def read(self, path: Path, file: IO[bytes], file_limit: int) -> SourceLines:
        total = 0
        while chunk := file.read(min(_CHUNK, file_limit + 1 - total)):
            total += len(chunk)
            if total > file_limit:  # it grew while being read
                raise ImportProblem(
                    f"{path}: more than {_size(file_limit)} is too big for a session file"
                )
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                self._add(chunk, start, end)
                self._finish(complete=True)
                start = end + 1
            self._add(chunk, start, len(chunk))
        if self.line or self.over:
            self._finish(complete=False)
        return self.lines

    def _add(self, chunk: bytes, start: int, end: int) -> None:
        if self.over:
            self.over += end - start
            self.clues.feed(chunk[start:end])
        elif len(self.line) + end - start > self.limit:
            self.over = len(self.line) + end - start
            self.clues.feed(self.line)
            self.clues.feed(chunk[start:end])
            self.line = bytearray()
        else:
            self.line += chunk[start:end]

    def _finish(self, *, complete: bool) -> None:
        line, over, clues = self.line, self.over, self.clues
        self.line, self.over, self.clues = bytearray(), 0, _Clues()
        number = self.number
        self.number += 1
        if over:
            self.lines.too_long.append((number, over))
            self.lines.unread.append(clues.line(number, over))
            return
        if not line.strip():
            return
        try:
            value = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            self.lines.skipped += 1
            self.lines.truncated_tail = self.lines.truncated_tail or not complete
            clues.feed(line)
            self.lines.unread.append(clues.line(number))
            return
        if isinstance(value, dict):
            self.lines.records.append(value)  # pyright: ignore[reportUnknownArgumentType]
            self.lines.numbers.append(number)
        else:
            self.lines.skipped += 1


def millis(stamp: Any) -> int:
    """Epoch milliseconds of an ISO 8601 time or a number (0 when there is none)."""
    if isinstance(stamp, bool):
        return 0
    if isinstance(stamp, int | float):
        return int(stamp)
    if isinstance(stamp, str):
        try:
            return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return 0
    return 0


def text_of(content: Any) -> str:
    """The text of message content: a string, or the ``text`` of its text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block["text"]
            for block in content  # pyright: ignore[reportUnknownVariableType]
            if isinstance(block, dict)
            and block.get("type") == "text"  # pyright: ignore[reportUnknownMemberType]
            and isinstance(block.get("text"), str)  # pyright: ignore[reportUnknownMemberType]
        ]
        return "\n".join(parts)  # pyright: ignore[reportUnknownArgumentType]
    return ""


def first_line(texts: Iterable[str]) -> str:
    """The first line of the first of ``texts`` the user typed (not a command's ``<tag>``)."""
    for text in texts:
        stripped = text.strip()
        if stripped and not stripped.startswith("<"):
            return stripped.splitlines()[0]
    return ""


def unknown_call_text(name: str, arguments: Any) -> dict[str, Any]:
    """The text block that stands for a call of a tool we do not have."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return {"type": "text", "text": f"[tool call {name}: {shown}]"}


def unknown_result_text(name: str, text: str, is_error: bool) -> str:
    """The text that stands for the result of a call of a tool we do not have."""
    what = "error of" if is_error else "result of"
    return f"[{what} {name}: {text}]" if text else f"[{what} {name}: (nothing)]"


def assistant_message(
    tool: str, blocks: list[dict[str, Any]], *, provider: str, model: str, timestamp: int
) -> dict[str, Any]:
    """An imported assistant message (``api`` ``import:TOOL``: its signatures are nobody's)."""
    calls = any(block.get("type") == "toolCall" for block in blocks)
    return {
        "role": "assistant",
        "content": blocks,
        "api": f"import:{tool}",
        "provider": provider,
        "model": model,
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": timestamp,
    }


_LATE = "_late"
"""Marks a user message holding results of tools we do not have: it goes after the answer's
``toolResult`` messages (a provider wants the results right after the calls)."""


def late_user_text(text: str, timestamp: int) -> dict[str, Any]:
    """A user message with the result of a tool we do not have (see :func:`finish_messages`)."""
    return {"role": "user", "content": text, "timestamp": timestamp, _LATE: True}


_SHOWN = "_shown"
"""Marks a user message that clients show otherwise (see :func:`mark_shown`)."""


def mark_shown(
    message: dict[str, Any], *, meta: str | None = None, typed: str | None = None
) -> dict[str, Any]:
    """``message`` (a user message) marked as one the user did not type, shown as the label
    ``meta``, or as the command ``typed`` they typed; :func:`finish_messages` moves the mark into
    :attr:`ImportedSession.shown`."""
    data = {key: value for key, value in (("meta", meta), ("typed", typed)) if value}
    if data:
        message[_SHOWN] = data
    return message


def finish_messages(
    messages: Iterable[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], dict[int, dict[str, str]], int]:
    """The messages in an order every provider takes, how clients show those marked
    (:func:`mark_shown`, by index), and how many results had no call.

    After an assistant message come the results of its calls (a call without one gets an
    error result saying it was not in the imported session), then one user message with the
    results of tools we do not have; a ``toolResult`` whose call is not in the assistant
    message before it becomes a user message of text."""
    out: list[dict[str, Any]] = []
    orphans = 0
    pending: list[dict[str, Any]] = list(messages)  # pyright: ignore[reportAssignmentType]
    index = 0
    while index < len(pending):
        message = dict(pending[index])
        index += 1
        if message.get("role") != "assistant":
            if message.get("role") == "toolResult":  # no assistant call before it
                orphans += 1
                name = str(message.get("toolName", "tool"))
                text = unknown_result_text(
                    name, text_of(message.get("content")), bool(message.get("isError"))
                )
                message = {"role": "user", "content": text, "timestamp": message["timestamp"]}
            message.pop(_LATE, None)
            out.append(message)
            continue
        out.append(message)
        calls = {
            block["id"]: block["name"]
            for block in message["content"]
            if block.get("type") == "toolCall"
        }
        results: dict[str, dict[str, Any]] = {}
        late: list[str] = []
        while index < len(pending) and (
            pending[index].get("role") == "toolResult" or pending[index].get(_LATE)
        ):
            follower = dict(pending[index])
            index += 1
            if follower.get("role") == "toolResult" and follower.get("toolCallId") in calls:
                results.setdefault(follower["toolCallId"], follower)
            elif follower.get("role") == "toolResult":
                orphans += 1
                name = str(follower.get("toolName", "tool"))
                late.append(
                    unknown_result_text(
                        name, text_of(follower.get("content")), bool(follower.get("isError"))
                    )
                )
            else:
                late.append(text_of(follower.get("content")))
        for call_id, name in calls.items():
            out.append(
                results.get(call_id)
                or {
                    "role": "toolResult",
                    "toolCallId": call_id,
                    "toolName": name,
                    "content": [
                        {
                            "type": "text",
                            "text": "(the result of this call was not in the imported session)",
                        }
                    ],
                    "isError": True,
                    "timestamp": message["timestamp"],
                }
            )
        if late:
            out.append(
                {"role": "user", "content": "\n\n".join(late), "timestamp": message["timestamp"]}
            )
    shown: dict[int, dict[str, str]] = {}
    for index, message in enumerate(out):
        data = message.pop(_SHOWN, None)
        if data:
            shown[index] = data
    return out, shown, orphans
