"""Open-time replay, shared by the durable backends (JSONL and PostgreSQL).

Both keep a session as a sequence of commits ``(seq, writes)`` plus sidecar records (sticky
document ops, a live task's transient patches) that belong to a commit's seq. Opening reads
them all, then rebuilds the in-memory :class:`~pico3.storage._tables.Tables` by replaying every
commit, sidecar writes appended, through the same :meth:`Tables.stage` and :meth:`Tables.apply`
as a live commit: a batch that would not commit today does not replay either, and fails open
with :class:`~pico3.storage.base.CorruptStorage` naming where it is stored.

* :class:`TaskFates` says which tasks the commits create and where each retired: sidecar
  patches of a retired or unknown task are never replayed (a retired task never resurrects).
* :func:`replay` is the loop; :func:`gc_paused` wraps a whole open.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from pico3.storage._tables import Tables
from pico3.storage.base import CorruptStorage, InvalidBatch
from pico3.storage.records import TaskPatchWrite, TaskWrite, Write

__all__ = ["TaskFates", "gc_paused", "replay"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block.

    Replay allocates every record of the session and keeps them all (acyclic JSON); letting the
    collector rescan that growing heap on the way costs more than the replay itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class TaskFates:
    """Which tasks a session's commits create (``known``: the seq of each one's create) and
    the seq of each one's terminal record (``retired``), from :meth:`scan` over every commit in
    seq order."""

    __slots__ = ("known", "retired")

    def __init__(self) -> None:
        self.known: dict[int, int] = {}
        self.retired: dict[int, int] = {}

    def scan(self, seq: int, writes: list[Write]) -> None:
        for write in writes:
            kind = type(write)
            if kind is TaskWrite:
                task = write.task  # type: ignore[union-attr]
                self.known.setdefault(task.id, seq)
                if task.status == "terminal":
                    self.retired.setdefault(task.id, seq)
            elif kind is TaskPatchWrite and write.patch.status == "terminal":  # type: ignore[union-attr]
                self.retired.setdefault(write.patch.id, seq)  # type: ignore[union-attr]

    def live(self, task_id: int) -> bool:
        """True when the task exists and has not retired: its sidecar patches replay."""
        return task_id in self.known and task_id not in self.retired

    def lives(self) -> list[tuple[int, int]]:
        """``(created, retired)`` seqs of every retired task, in creation order: a commit of
        seq ``s`` with ``created < s < retired`` may have been one of its sidecar's own lines
        (gone with the sidecar once the task retired)."""
        known = self.known
        return sorted((known.get(id, 0), seq) for id, seq in self.retired.items())


def replay(
    tables: Tables,
    commits: Iterable[tuple[int, list[Write]]],
    extra: Mapping[int, list[Write]],
    where: Callable[[int], tuple[str, int | None]],
) -> None:
    """Stage and apply every commit ``(seq, writes)`` in order, ``extra[seq]`` (its sidecar
    writes) appended. A batch that does not replay raises :class:`CorruptStorage` at
    ``where(seq)`` (the store, and the line when it has lines, of that commit)."""
    stage, apply, more = tables.stage, tables.apply, extra.get
    seq = 0
    try:
        for seq, writes in commits:
            added = more(seq)
            apply(stage(writes + added if added else writes, seq))
    except InvalidBatch as exc:
        path, line = where(seq)
        raise CorruptStorage(path, line, f"batch does not replay: {exc}") from None
