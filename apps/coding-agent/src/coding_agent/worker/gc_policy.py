"""Keeping a long session's data out of the cycle collector's way.

A session worker holds its whole session in memory (entries, documents, the view), and that
heap only grows. CPython's collector rescans long-lived objects on every full collection, so
late in a long session most of a turn's CPU went into collections that free nothing. After each
turn :func:`freeze_after_turns` moves everything alive into the permanent generation
(``gc.freeze()``), so collections look only at what later turns allocate. Cyclic garbage made
of objects frozen while still alive is reclaimed by a full collection every
``collect_every`` turns (``gc.unfreeze()``, ``gc.collect()``, ``gc.freeze()``), which bounds
what freezing can hold on to.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["freeze_after_turns"]


class _Kernel(Protocol):
    def add_commit_listener(self, listener: Callable[[Any], None]) -> Callable[[], None]: ...


def freeze_after_turns(kernel: _Kernel, *, collect_every: int = 200) -> Callable[[], None]:
    """Freeze the heap after every commit that ends a turn; returns the remover (which also
    unfreezes)."""
    turns = [0]

    def on_commit(batch: Any) -> None:
        events: dict[int, list[dict[str, Any]]] = batch.events
        if not any(e.get("type") == "turn.ended" for group in events.values() for e in group):
            return
        turns[0] += 1
        if turns[0] % collect_every == 0:
            gc.unfreeze()
            gc.collect()
        gc.freeze()

    remove = kernel.add_commit_listener(on_commit)

    def stop() -> None:
        remove()
        gc.unfreeze()

    return stop
