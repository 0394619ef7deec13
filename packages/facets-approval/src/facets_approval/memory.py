"""A subagent's memory folder: its own files, read and written without asking.

Claude Code gives a subagent whose definition says ``memory: user | project | local`` a folder
that persists across its runs (``~/.claude/agent-memory/<agent>/``,
``<project>/.claude/agent-memory/<agent>/``, ``<project>/.claude/agent-memory-local/<agent>/``),
and the agent reads and writes there as it likes. The subagents feature creates the folder and
names it in the subagent's task input under :data:`~.contract.OWNER_MEMORY_KEY`::

    {"folder": "/abs/project/.claude/agent-memory/reviewer", "base": "/abs/project"}

``base`` is where the folder must stay: the project (``project``, ``local``) or ``~/.claude``
(``user``). For the conversation that task owns — not its parent, not a subagent it runs in
turn — the approval hook treats the folder as the agent's own files (:func:`own_folder`):

* a read there is never a read outside the working directories;
* a ``write`` or ``edit`` there runs without asking in the modes that would ask for an edit in
  the project (``ask``, ``accept-edits``, ``sandbox``), unless a rule asks or denies; ``plan``
  stays read-only. The folder's own place is not a guarded one (``.claude/`` guards a project's
  settings and hooks, not this folder: :func:`unguarded`), but anything guarded *inside* it
  still asks.

The folder counts only while it really is where it is written: checked at each decision, with
symlinks resolved, its real path must be ``base``'s real path plus the same names. A project's
``.claude`` or ``agent-memory`` that is a symlink to elsewhere (another folder of the project, or
outside it) is not the agent's own, and calls there are decided as any other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from chord import Context

from .contract import OWNER_MEMORY_KEY
from .guarded import guarded_reason, path_within

__all__ = ["MemoryFolders", "own_folder", "unguarded"]

SUBAGENT_KIND = "subagents.run"
"""The task kind whose input may name a memory folder (the subagents feature's)."""


def own_folder(entry: object) -> str | None:
    """The memory folder's real path when it is where it is written (module doc), else
    ``None`` (no entry, a malformed one, or a symlink on the way)."""
    if not isinstance(entry, Mapping):
        return None
    folder, base = entry.get("folder"), entry.get("base")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(folder, str) or not isinstance(base, str):
        return None
    if not os.path.isabs(folder) or not os.path.isabs(base):
        return None
    folder, base = os.path.normpath(folder), os.path.normpath(base)
    if not path_within(folder, base) or folder == base:
        return None
    real = os.path.realpath(folder)
    if real != os.path.join(os.path.realpath(base), os.path.relpath(folder, base)):
        return None
    return real if os.path.isdir(real) else None


def unguarded(guarded: Iterable[object], folder: str, workspace: str) -> list[object]:
    """The guarded paths without those that cover the memory folder itself (``.claude/`` for a
    project's memory): what stays guarded is what is guarded inside it."""
    return [g for g in guarded if guarded_reason(folder, workspace, [g], real=folder) is None]


class MemoryFolders:
    """The memory folder entry of each conversation's owning task (read once: a task's input
    never changes); :func:`own_folder` is applied at each decision."""

    def __init__(self, harness: Any) -> None:
        self._harness = harness
        self._entries: dict[int, object] = {}

    async def folder(self, conversation_id: int, ctx: Context) -> str | None:
        """The conversation's own memory folder (real path), or ``None``."""
        if conversation_id not in self._entries:
            entry: object = None
            task = await self._harness.owner_task(conversation_id, ctx)
            if task is not None and task.kind == SUBAGENT_KIND:
                given = task.input if isinstance(task.input, dict) else {}
                entry = given.get(OWNER_MEMORY_KEY)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            self._entries[conversation_id] = entry
        return own_folder(self._entries[conversation_id])
