"""Bounded bookkeeping of an ACP session: which prompts wait for their turn, and the tool calls
whose results have not come yet.

A session lives as long as the editor keeps it open, for any number of turns, so nothing here
grows with them:

* :class:`TurnWaits` holds an event per prompt *waiting* for its input's turn to end (removed
  when the prompt returns) and the outcomes of the last :data:`ENDED_KEPT` turns that ended
  with nobody waiting yet (the turn may end before the prompt that sent the input starts
  waiting; a turn the harness resumed after ``session/load`` has no prompt at all).
* :class:`Recent` is a mapping that forgets its oldest entries beyond a size (the tool calls
  announced and not yet answered: a call of an aborted turn never gets a result).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import MutableMapping
from typing import TypeVar

import anyio

__all__ = ["CALLS_KEPT", "ENDED_KEPT", "Recent", "TurnWaits"]

K = TypeVar("K")
V = TypeVar("V")

ENDED_KEPT = 64
"""Outcomes kept of turns that ended while no prompt waited for them."""

CALLS_KEPT = 1024
"""Tool calls kept while their results are awaited (far more than one turn makes)."""


class Recent(OrderedDict[K, V]):
    """An ordered mapping of at most ``size`` entries: setting one more forgets the oldest."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class TurnWaits:
    """The prompts waiting for their turns, and the recent turns that ended unwaited."""

    def __init__(self, kept: int = ENDED_KEPT) -> None:
        self._waits: dict[int, anyio.Event] = {}
        self._outcomes: dict[int, str] = {}
        self._unwaited: MutableMapping[int, str] = Recent(kept)

    def ended(self, input_id: int, outcome: str) -> None:
        """The turn holding ``input_id`` ended with ``outcome`` (``done``, or
        ``status:reason:detail``); the first outcome told is the one kept."""
        if input_id in self._waits:
            self._outcomes.setdefault(input_id, outcome)
            self._waits[input_id].set()
        elif input_id not in self._unwaited:
            self._unwaited[input_id] = outcome

    def waiting(self) -> list[int]:
        """The inputs a prompt waits for and whose turn has not been told ended."""
        return [key for key, event in self._waits.items() if not event.is_set()]

    async def wait(self, input_id: int) -> str:
        """Wait until the turn holding ``input_id`` ends (at once when it already has); its
        outcome. Nothing of ``input_id`` is kept afterwards."""
        early = self._unwaited.pop(input_id, None)
        if early is not None:
            return early
        event = self._waits.setdefault(input_id, anyio.Event())
        try:
            await event.wait()
            return self._outcomes.get(input_id, "done")
        finally:
            self._waits.pop(input_id, None)
            self._outcomes.pop(input_id, None)

    def __len__(self) -> int:
        """How many records are held (waits, and outcomes told early): bounded by the prompts
        waiting plus :data:`ENDED_KEPT`."""
        return len(self._waits) + len(self._unwaited)
