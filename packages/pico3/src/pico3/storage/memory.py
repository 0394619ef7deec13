"""MemoryStorage: the reference backend, held entirely in process memory (docs/design/storage.md#memory-backend).

Every batch is validated and staged in full before any table changes, so a refused batch
changes no table, document, id high-water or seq. Committed state lives in the object, not in
the session that opened it: after :meth:`close`, a new session may :meth:`open` the same
``MemoryStorage`` and finds every committed batch (ids minted but never committed may then be
handed out again; committed ids never are). That makes it the backend of choice for recovery
tests that do not need files.
"""

from __future__ import annotations

from collections.abc import Sequence

from chord.context import Context
from pico3.storage._tables import TableStorage, normalize_batch
from pico3.storage.base import current_prechecked
from pico3.storage.records import DocRef, Write

__all__ = ["MemoryStorage"]


class MemoryStorage(TableStorage):
    """A :class:`~pico3.storage.base.Storage` kept in memory; reopenable after close."""

    def __repr__(self) -> str:
        return f"<MemoryStorage seq={self.seq}>"

    async def open(self, ctx: Context) -> None:
        """Claim the storage for one session; ids minted by an earlier opening may recur."""
        self._claim()
        self._next_id = self._tables.high_water + 1
        self._open = True

    async def close(self, ctx: Context) -> None:
        """Release the storage; committed state stays for the next :meth:`open`."""
        self._open = False

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        """Validate the whole batch, then apply it; return its seq."""
        return self.commit_nowait(writes)

    def commit_nowait(self, writes: Sequence[Write]) -> int:
        """:meth:`commit` without the coroutine (a memory commit never waits)."""
        tables = self._check_open()
        prechecked = current_prechecked()
        staged = tables.stage(normalize_batch(writes, prechecked)[0], tables.seq + 1)
        high_water = self._high_water_after(staged)
        tables.apply(staged)
        tables.high_water = high_water
        return tables.seq

    async def truncate(self, ref: DocRef, ctx: Context) -> None:
        """Drop a sticky document's op log before its last base."""
        tables = self._check_open()
        if ref.doc == "sticky" and isinstance(ref.conversation_id, int):
            tables.truncate_sticky(ref.conversation_id)
