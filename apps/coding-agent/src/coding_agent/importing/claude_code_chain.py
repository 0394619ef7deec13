"""The conversation's chain of parent links in Claude Code's session file, and the bridges
across lines that could not be read (:mod:`~coding_agent.importing.claude_code_sessions`
says when and why)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from coding_agent.importing.common import UnreadLine, mark_shown, millis

__all__ = ["CONVERSATION", "NOTED_BRIDGES", "Bridge", "branch", "bridge_notes"]

CONVERSATION = ("user", "assistant", "system")
"""The types of line that are the conversation (others with a ``uuid`` only link it)."""

NOTED_BRIDGES = 10
"""The bridges an import's report names one by one; one more line counts the rest."""


@dataclass(frozen=True)
class Bridge:
    """Where the chain of parent links reached a line that could not be read, and was joined
    across it: ``lines`` the unread lines (newest first), ``after`` the line number the chain
    went on from (``None``: the unread line began the conversation, or nothing is before it),
    ``child`` the line number whose parent was not there."""

    lines: tuple[UnreadLine, ...]
    child: int
    after: int | None
    stamp: int
    """The time of line ``child`` (epoch milliseconds), the marker's."""

    def _which(self) -> str:
        numbers = sorted(line.number for line in self.lines)
        if len(numbers) == 1:
            return f"line {numbers[0]} ({self.lines[0].why})"
        return "lines " + ", ".join(str(n) for n in numbers)

    def note(self) -> str:
        """The import report's line for it."""
        if self.after is None:
            return (
                f"the conversation reaches {self._which()}, which could not be read: "
                f"it is imported from line {self.child} on"
            )
        return (
            f"the conversation was joined across {self._which()}, which could not be read: "
            f"line {self.child} follows line {self.after}"
        )

    def marker(self) -> dict[str, Any]:
        """The user message standing where the lines were: shown as one collapsed line; the
        model reads that something is missing there."""
        count = len(self.lines)
        label = f"{count} line{'s' if count > 1 else ''} of the file could not be read here"
        text = (
            f"[{label}: {self._which()} of the Claude Code session file; what "
            f"{'they' if count > 1 else 'it'} held is not in this conversation]"
        )
        return mark_shown({"role": "user", "content": text, "timestamp": self.stamp}, meta=label)


def bridge_notes(bridges: list[Bridge]) -> list[str]:
    """The import report's lines for ``bridges``: the first :data:`NOTED_BRIDGES` each, then
    how many more (a garbled file can have thousands; each has its marker)."""
    notes = [bridge.note() for bridge in bridges[:NOTED_BRIDGES]]
    rest = bridges[NOTED_BRIDGES:]
    if rest:
        count = sum(len(bridge.lines) for bridge in rest)
        notes.append(
            f"the conversation was joined across {count} more line(s) that could not be read, "
            f"from line {min(line.number for b in rest for line in b.lines)} on"
        )
    return notes


def branch(
    linked: list[tuple[int, dict[str, Any]]], unread: list[UnreadLine]
) -> tuple[list[dict[str, Any] | Bridge], list[Bridge]]:
    """The path from the last conversation line back to its root, oldest first, and the
    bridges in it (:meth:`_Lines.bridge`). ``linked``: the lines with a ``uuid`` (progress
    lines and attachments too: Claude Code links the conversation through them), with their
    numbers, in file order; ``unread``: the lines that could not be read, in file order."""
    conversation = [i for i, (_, r) in enumerate(linked) if r.get("type") in CONVERSATION]
    if not conversation:
        return [], []
    lines = _Lines(linked, unread)
    path: list[dict[str, Any] | Bridge] = []
    bridges: list[Bridge] = []
    seen: set[str] = set()
    current: int | None = conversation[-1]
    while current is not None and linked[current][1]["uuid"] not in seen:
        number, record = linked[current]
        seen.add(record["uuid"])
        if record.get("type") in CONVERSATION:
            path.append(record)
        parent = record.get("parentUuid")
        if not isinstance(parent, str):
            break
        current = lines.by_id.get(parent)
        if current is None:
            bridge, current = lines.bridge(parent, number, millis(record.get("timestamp")))
            if bridge is not None:
                path.append(bridge)
                bridges.append(bridge)
    path.reverse()
    bridges.reverse()
    return path, bridges


class _Lines:
    """The file's lines as a walk back along the chain looks them up."""

    def __init__(self, linked: list[tuple[int, dict[str, Any]]], unread: list[UnreadLine]):
        self.linked = linked
        self.by_id = {r["uuid"]: index for index, (_, r) in enumerate(linked)}
        self.numbers = [number for number, _ in linked]
        self.unread = unread
        self.unread_numbers = [line.number for line in unread]
        self.naming: dict[str, list[UnreadLine]] = {}
        for line in unread:
            for uuid in line.uuids:
                self.naming.setdefault(uuid, []).append(line)
        self.used: set[int] = set()  # unread lines bridged already

    def bridge(self, parent: str, child: int, stamp: int) -> tuple[Bridge | None, int | None]:
        """Line ``child``'s parent ``parent`` is not in the file: if it was a line that could
        not be read, the bridge across it (``stamp``: line ``child``'s time) and the index in
        ``linked`` to go on from.

        The unread line is the one naming ``"uuid": parent``, or else the line just before
        ``child`` (of those with a uuid and those unread: Claude Code appends each line right
        after its parent) when it is unread and names no uuid (its uuid, written after the
        message, was lost with it: a crash cut it off, or it was never read). The chain goes
        on from the ``parentUuid`` that line names (an unread line's: bridged across too;
        ``null``: the unread line began the conversation or a compaction), or else from the
        line just before it. No such unread line: ``(None, None)``, and the chain stops there,
        as Claude Code's ``--resume`` stops (a file whose start is missing, a parent in
        another file)."""
        lines: list[UnreadLine] = []
        wanted, before = parent, child

        def bridge(after: int | None) -> Bridge:
            return Bridge(tuple(lines), child, after, stamp)

        while True:
            line = self._unread(wanted, before)
            if line is None:
                return (bridge(None) if lines else None), None
            self.used.add(line.number)
            lines.append(line)
            if line.names_parent and line.parent is None:  # it began the conversation
                return bridge(None), None
            if line.parent is not None and line.parent in self.by_id:
                found = self.by_id[line.parent]
                return bridge(self.numbers[found]), found
            if line.parent is not None:  # its parent could not be read either
                wanted, before = line.parent, line.number
                continue
            index = bisect_left(self.numbers, line.number) - 1
            return (bridge(self.numbers[index]), index) if index >= 0 else (bridge(None), None)

    def _unread(self, uuid: str, child: int) -> UnreadLine | None:
        """The unread line that was ``uuid``, the parent of line ``child`` (see :meth:`bridge`)."""
        named = [line for line in self.naming.get(uuid, ()) if line.number not in self.used]
        if named:
            return named[0]
        at = bisect_left(self.unread_numbers, child) - 1
        if at < 0:
            return None
        line = self.unread[at]
        index = bisect_left(self.numbers, child) - 1
        if index >= 0 and self.numbers[index] > line.number:  # a line with a uuid is between
            return None
        return None if line.uuids or line.number in self.used else line
