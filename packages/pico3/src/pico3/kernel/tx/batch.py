"""The kernel's record of one commit (:class:`Batch`): what the builder wrote, for persistence,
the view and commit listeners."""

from __future__ import annotations

from typing import Any

from pico3.kernel.errors import ReadAfterWrite
from pico3.kernel.proxy import Membrane, Recorder
from pico3.storage.records import DocRef, DocWrite, Entry, Input, Task, Write

__all__ = ["Batch"]


class Batch:
    """The kernel's side of one commit: what the builder wrote, recorded for persistence, the
    view and commit listeners. Builders never see it; they get the :class:`Transaction`."""

    def __init__(self) -> None:
        self.open = True
        self.membrane = Membrane()
        self.poison: ReadAfterWrite | None = None
        self.writes: list[Write] = []
        self.events: dict[int, list[dict[str, Any]]] = {}
        self.recorders: dict[DocRef, Recorder] = {}
        self.config_changed: dict[int, list[str]] = {}
        self.new_entries: list[Entry] = []
        self.changed_docs: set[DocRef] = set()
        # per changed document, the top-level keys its ops touched (``None``: the whole
        # document); the views refresh only the sections those keys feed
        self.changed_keys: dict[DocRef, set[Any] | None] = {}
        self.doc_ops: dict[DocRef, list[Any]] = {}
        """The ops each changed document recorded (shared with its write: read only)."""
        self.created: list[int] = []
        self.tasks: dict[int, Task] = {}  # every task created or patched, as it ends up
        self.task_conversations: set[int] = set()
        self.inputs: dict[int, Input] = {}
        # entries built from payloads this batch validated and copied itself, and doc writes
        # of ops its document proxies recorded (by id()): storage need not walk them again;
        # the entries' events share the payload until a view copies them
        self.prechecked: list[int] = []
        self.heads = False  # some appended entry carries a head (checked at commit end)
        self.shared_events: set[int] = set()

    def finish(self) -> list[Write]:
        """Close the builder surface; flush documents into ``doc`` writes and config changes
        into ``config.changed`` events. Returns the batch to persist."""
        self.open = False
        writes = list(self.writes)
        for ref, recorder in self.recorders.items():
            ops = recorder.take()
            if ops:
                self.changed_docs.add(ref)
                touched: set[Any] | None = set()
                for op in ops:
                    if op[0] == "r" or not op[1]:
                        touched = None
                        break
                    touched.add(op[1][0])
                self.changed_keys[ref] = touched
                self.doc_ops[ref] = ops
                write = DocWrite(ref=ref, ops=[list(op) for op in ops])
                # the document proxy validated and copied every value it recorded
                self.prechecked.append(id(write))
                writes.append(write)
        for cid, keys in self.config_changed.items():
            self.events.setdefault(cid, []).append({"type": "config.changed", "keys": keys})
        return writes

    @property
    def has_events(self) -> bool:
        """True when any conversation got an event."""
        return any(self.events.values())
