"""A session file's chain of parent links, followed back from its last line, and the bridges
across lines that could not be read: Claude Code's ``uuid``/``parentUuid`` chain and pi's
``id``/``parentId`` tree are the same walk (:mod:`~coding_agent.importing.claude_code_sessions`
and :mod:`~coding_agent.importing.pi_sessions` say which line starts it and what is kept).

Both agents append each line right after its parent, and when they load a file they skip a
line that is not JSON and follow the links from the last line back until a parent is not
there: the history before a line that could not be read is lost. The import does better: when
the chain reaches a parent that is not in the file, and that parent was a line that could not
be read, the chain is joined across it (:meth:`_Lines.bridge`), the import's report names it
(:func:`bridge_notes`) and a collapsed marker stands where it was (:meth:`Bridge.marker`). A
parent missing for no unread line (a file whose start is missing, a fork whose parent is in
another file, a dangling link) still ends the chain there, as the agents' own ``--resume``
does.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from coding_agent.importing.common import LINK_KEYS, UnreadLine, mark_shown, millis

__all__ = ["NOTED_BRIDGES", "Bridge", "Links", "branch", "bridge_notes"]

NOTED_BRIDGES = 10
"""The bridges an import's report names one by one; one more line counts the rest."""


@dataclass(frozen=True)
class Links:
    """How an agent's session file links its lines: the key of a line's own ``id`` and of its
    ``parent``'s (both among :data:`~coding_agent.importing.common.LINK_KEYS`, which
    :func:`~coding_agent.importing.common.read_lines` looks for in a line it cannot read), and
    the ``agent``'s name as the marker says it (``Claude Code``)."""

    id: str
    parent: str
    agent: str

    def __post_init__(self) -> None:
        unknown = sorted({self.id, self.parent} - LINK_KEYS)
        if unknown:
            raise ValueError(
                f"link keys {unknown} are not looked for in lines that cannot be read: "
                "add them to coding_agent.importing.common.LINK_KEYS"
            )


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
    links: Links

    def _which(self) -> str:
        numbers = sorted(line.number for line in self.lines)
        if len(numbers) == 1:
            return f"line {numbers[0]} ({self.lines[0].why})"
        return "lines " + ", ".join(str(n) for n in numbers)

    def names(self, line_id: str) -> bool:
        """Whether one of the unread lines names ``line_id`` as an id (it may have been that
        line: pi's compaction names the first line it kept)."""
        return any(line_id in line.named.get(self.links.id, ()) for line in self.lines)

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
            f"[{label}: {self._which()} of the {self.links.agent} session file; what "
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
    linked: list[tuple[int, dict[str, Any]]],
    unread: list[UnreadLine],
    links: Links,
    leaf: int | None,
) -> tuple[list[dict[str, Any] | Bridge], list[Bridge]]:
    """The path from ``linked[leaf]`` back to its root, oldest first, with the bridges in it
    (:meth:`_Lines.bridge`), and the bridges alone. ``linked``: the lines with an id (a string
    under ``links.id``), with their numbers, in file order; ``unread``: the lines that could not
    be read, in file order; ``leaf``: where the branch imported ends (``None``: nowhere, an
    empty path). A loop of links is cut where it closes."""
    if leaf is None:
        return [], []
    lines = _Lines(linked, unread, links)
    path: list[dict[str, Any] | Bridge] = []
    bridges: list[Bridge] = []
    seen: set[str] = set()
    current: int | None = leaf
    while current is not None and linked[current][1][links.id] not in seen:
        number, record = linked[current]
        seen.add(record[links.id])
        path.append(record)
        parent = record.get(links.parent)
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

    def __init__(
        self, linked: list[tuple[int, dict[str, Any]]], unread: list[UnreadLine], links: Links
    ):
        self.links = links
        self.by_id = {r[links.id]: index for index, (_, r) in enumerate(linked)}
        self.numbers = [number for number, _ in linked]
        self.unread = unread
        self.unread_numbers = [line.number for line in unread]
        self.naming: dict[str, list[UnreadLine]] = {}
        for line in unread:
            for line_id in line.named.get(links.id, ()):
                self.naming.setdefault(line_id, []).append(line)
        self.used: set[int] = set()  # unread lines bridged already

    def bridge(self, parent: str, child: int, stamp: int) -> tuple[Bridge | None, int | None]:
        """Line ``child``'s parent ``parent`` is not in the file: if it was a line that could
        not be read, the bridge across it (``stamp``: line ``child``'s time) and the index in
        ``linked`` to go on from.

        The unread line is the one whose bytes name ``parent`` as an id, or else the line just
        before ``child`` (of those with an id and those unread: both agents append each line
        right after its parent) when it is unread and names no id (its id was lost with it:
        Claude Code writes ``uuid`` after the message, so a line cut off in a crash loses it;
        pi writes ``id`` first, so only a line cut off at its start, or garbled there, does).
        The chain goes on from the parent that line names (an unread line's: bridged across
        too; ``null``: the unread line began the conversation or a compaction), or else from
        the line just before it. No such unread line: ``(None, None)``, and the chain stops
        there, as the agents' own ``--resume`` stops (a file whose start is missing, a parent
        in another file)."""
        lines: list[UnreadLine] = []
        wanted, before = parent, child

        def bridge(after: int | None) -> Bridge:
            return Bridge(tuple(lines), child, after, stamp, self.links)

        while True:
            line = self._unread(wanted, before)
            if line is None:
                return (bridge(None) if lines else None), None
            self.used.add(line.number)
            lines.append(line)
            names_parent = self.links.parent in line.first_named
            line_parent = line.first_named.get(self.links.parent)
            if names_parent and line_parent is None:  # it began the conversation
                return bridge(None), None
            if line_parent is not None and line_parent in self.by_id:
                found = self.by_id[line_parent]
                return bridge(self.numbers[found]), found
            if line_parent is not None:  # its parent could not be read either
                wanted, before = line_parent, line.number
                continue
            index = bisect_left(self.numbers, line.number) - 1
            return (bridge(self.numbers[index]), index) if index >= 0 else (bridge(None), None)

    def _unread(self, line_id: str, child: int) -> UnreadLine | None:
        """The unread line that was ``line_id``, the parent of line ``child`` (see
        :meth:`bridge`)."""
        named = [line for line in self.naming.get(line_id, ()) if line.number not in self.used]
        if named:
            return named[0]
        at = bisect_left(self.unread_numbers, child) - 1
        if at < 0:
            return None
        line = self.unread[at]
        index = bisect_left(self.numbers, child) - 1
        if index >= 0 and self.numbers[index] > line.number:  # a line with an id is between
            return None
        if line.named.get(self.links.id) or line.number in self.used:
            return None
        return line
