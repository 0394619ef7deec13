"""Request messages converted to their API's JSON once, not once per turn.

A long conversation re-sends its whole history every turn, and pico3 hands the adapters the
*same* message records turn after turn (its transcript cache and
:class:`pico3.models.MessageMemo` keep them). An adapter's conversion is a left fold over the
records (:class:`Fold`: ``feed`` each record in order, then ``render``), so :class:`FoldMemo`
keeps the fold of the last request of each conversation and, when a request starts with the
records of the last one (compared by identity first, then by value, in C, without copying the
history: :func:`pico3.models.extend_prefix`), feeds it only the new records. Any other request (a rewind, a compaction, another conversation) folds from
scratch, so the result is always the fold of the request's records. Folds render their records
JSON-encoded (:class:`msgspec.Raw`) for the request body; the encodings of the records that
can no longer change are kept comma-joined in a few chunks (:class:`JoinedChunks`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import msgspec

from pico3.models import extend_prefix

__all__ = ["Fold", "FoldMemo", "JoinedChunks"]

_SLOTS = 16
"""Conversations (told apart by their first record) whose last fold is kept."""


class Fold(Protocol):
    """A conversion of records, fed in order."""

    def feed(self, record: Any, /) -> None: ...

    def render(self) -> list[Any]: ...


class FoldMemo:
    """The fold of each recent conversation's last request, extended by the next one."""

    __slots__ = ("_make", "_slots")

    def __init__(self, make: Callable[[], Fold]) -> None:
        self._make = make
        self._slots: OrderedDict[int, tuple[object, list[Any], Fold]] = OrderedDict()

    def render(self, records: Sequence[Any]) -> list[Any]:
        """The fold of ``records``, rendered."""
        if not records:
            return self._make().render()
        key = id(records[0])
        slot = self._slots.pop(key, None)  # a fold that raises is not kept
        seen: list[Any] = []
        fold = None
        start = 0
        if slot is not None and slot[0] is records[0]:
            _, seen, fold = slot
            start = len(seen)
            if not extend_prefix(seen, records):
                fold = None
        if fold is None:
            seen, fold, start = list(records), self._make(), 0
        for record in seen[start:]:
            fold.feed(record)
        self._slots[key] = (records[0], seen, fold)
        if len(self._slots) > _SLOTS:
            self._slots.popitem(last=False)
        return fold.render()


class JoinedChunks:
    """Encoded JSON values, comma-joined into a few chunks that render as :class:`msgspec.Raw`
    array elements: msgspec writes each verbatim between commas, so ``[*chunks.raws(), ...]``
    encodes as if every value were an element of its own.

    One chunk for the whole history (what the folds kept before) was joined again every turn:
    a copy of the whole encoded history, ~0.4 MB at turn 2,000 of the long-session benchmark.
    Here :meth:`extend` joins the new values into a chunk and merges it with the chunk before
    while that one is at most twice its size, much as a binary counter carries: every chunk is
    then more than twice the size of the next, so there are at most log2(bytes) of them, and a
    value is copied again only when the chunk it is in grows by half or more, so a turn costs
    about what its new values do (amortised), not what the history does."""

    __slots__ = ("_chunks", "_raws")

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._raws: list[msgspec.Raw] = []

    def extend(self, values: list[bytes]) -> None:
        """Add ``values`` (each an encoded JSON value) after those added so far."""
        if not values:
            return
        chunk = b",".join(values)
        chunks, raws = self._chunks, self._raws
        while chunks and len(chunks[-1]) <= 2 * len(chunk):
            chunk = b",".join((chunks.pop(), chunk))
            raws.pop()
        chunks.append(chunk)
        raws.append(msgspec.Raw(chunk))

    def raws(self) -> list[msgspec.Raw]:
        """The chunks, in order, as :class:`msgspec.Raw` values (a new list)."""
        return list(self._raws)

    def __bool__(self) -> bool:
        return bool(self._chunks)
