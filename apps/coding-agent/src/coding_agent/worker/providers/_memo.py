"""Request messages converted to their API's JSON once, not once per turn.

A long conversation re-sends its whole history every turn, and pico3 hands the adapters the
*same* message records turn after turn (its transcript cache and
:class:`pico3.models.MessageMemo` keep them). An adapter's conversion is a left fold over the
records (:class:`Fold`: ``feed`` each record in order, then ``render``), so :class:`FoldMemo`
keeps the fold of the last request of each conversation and, when a request starts with the
records of the last one (compared by identity first, then by value, in C), feeds it only the
new records. Any other request (a rewind, a compaction, another conversation) folds from
scratch, so the result is always the fold of the request's records. Folds render their records
JSON-encoded (:class:`msgspec.Raw`) for the request body.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["Fold", "FoldMemo"]

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
        slot = self._slots.pop(key, None)
        seen: list[Any] = []
        fold = None
        if slot is not None and slot[0] is records[0]:
            _, seen, fold = slot
            if len(records) < len(seen) or records[: len(seen)] != seen:
                fold = None
        if fold is None:
            seen, fold = [], self._make()
        start = len(seen)
        fresh = records[start:]
        for record in fresh:
            fold.feed(record)
        seen.extend(fresh)
        self._slots[key] = (records[0], seen, fold)
        if len(self._slots) > _SLOTS:
            self._slots.popitem(last=False)
        return fold.render()
