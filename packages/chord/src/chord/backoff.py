"""Exponential backoff with jitter: the one delay rule every retry loop in the tree uses.

The delay before attempt ``n`` (1-based) is drawn from ``[(1 - jitter) * c, c]`` where the
ceiling ``c = min(initial * factor ** (n - 1), maximum)``. Jitter spreads the retries of many
clients that failed together (a restarted worker, a provider's outage) so they do not come back
in lock step; drawing *below* the ceiling keeps every delay within the cap callers promise
(``maximum`` is never exceeded) while the lower bound keeps the backoff growing.

The random source is a field (``random``: a callable returning a float in ``[0, 1)``), so a
test passes ``lambda: 0.0`` (always the ceiling) or a seeded ``random.Random().random`` and
gets the same delays every run. Users: :mod:`chord.wire.source` (reconnects),
:mod:`pico3.models.retry` (provider calls) and the coding agent's worker supervisor (restarts).
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays of ``initial`` seconds, multiplied by ``factor`` up to ``maximum``, with ``jitter``.

    ``jitter`` is the fraction of each delay that is random (0: exact delays, 1: anywhere from
    zero to the ceiling; default 0.5). Invalid values raise :class:`ValueError` naming them.
    """

    initial: float = 0.05
    maximum: float = 2.0
    factor: float = 2.0
    jitter: float = 0.5
    random: Callable[[], float] = field(default=_random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.maximum) or self.factor < 1:
            raise ValueError("Backoff needs 0 < initial <= maximum and factor >= 1")
        if not (0 <= self.jitter <= 1):
            raise ValueError(f"Backoff.jitter must be within [0, 1], got {self.jitter!r}")

    def ceiling(self, attempt: int) -> float:
        """The un-jittered delay before attempt ``attempt`` (1-based)."""
        return capped_exponential(self.initial, self.factor, self.maximum, attempt)

    def delay(self, attempt: int) -> float:
        """The delay before attempt ``attempt`` (1-based), jittered."""
        return jittered(self.ceiling(attempt), self.jitter, self.random)

    def delays(self) -> Iterator[float]:
        """The delay before each retry of one outage (attempts 1, 2, …)."""
        attempt = 1
        while True:
            yield self.delay(attempt)
            attempt += 1


def capped_exponential(initial: float, factor: float, maximum: float, attempt: int) -> float:
    """``min(initial * factor ** (attempt - 1), maximum)`` without overflowing."""
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt}")
    try:
        raw = initial * factor ** (attempt - 1)
    except OverflowError:
        raw = math.inf
    return min(raw, maximum)


def jittered(ceiling: float, jitter: float, random: Callable[[], float]) -> float:
    """A delay drawn from ``[(1 - jitter) * ceiling, ceiling]`` with ``random()`` in ``[0, 1)``."""
    return ceiling * (1 - jitter * random())
