"""What every side of the indexer feature agrees on, with no host imports (docs/design/harness.md#task-kinds, docs/design/chord.md#feature-layout).

The session facet registers the ``repo.indexer`` task kind; its ``describe()`` publishes an
:class:`IndexerStatus` as ``view.tasks[id].status``, which is all a presentation facet needs to
render progress. The index itself lives in the session's state folder as :data:`INDEX_FILE_NAME`.

Starting a run from a presentation goes through :data:`IndexerService` (``pi.indexer``), a
remotable singleton with one method, ``start``: the presentation has no harness, and the
conversation service deliberately offers no general commit.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Protocol, TypedDict

import msgspec

from chord import Context, Service, define_service

__all__ = [
    "INDEXER_KIND",
    "INDEX_FILE_NAME",
    "IndexRequest",
    "IndexStarted",
    "IndexerService",
    "IndexerServiceApi",
    "IndexerStage",
    "IndexerStatus",
]

INDEXER_KIND = "repo.indexer"
"""The custom task kind's name, as it appears in ``view.tasks[id].kind``."""

INDEX_FILE_NAME = "code-index.sqlite3"
"""The index's file name inside the session's state folder."""

IndexerStage = Literal["starting", "scanning", "writing", "pruning", "done"]
"""Where an indexer run is: the checkpoint phase, or ``starting`` before the first checkpoint."""


class IndexerStatus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The JSON shape of ``view.tasks[id].status`` for a ``repo.indexer`` task.

    ``files_total`` is the size of the current scan (0 until it is known); ``files_indexed`` and
    ``batches_done`` count what this run has committed, including batches found already written.
    """

    stage: IndexerStage
    files_total: int = 0
    files_indexed: int = 0
    batches_done: int = 0


class IndexRequest(TypedDict):
    """``IndexerService.start`` argument.

    ``conversationId`` is where the task lives and where its closing notice is written (default:
    the session's root conversation); ``root`` is the directory to index, resolved in the session
    worker (default: the session's workspace).
    """

    conversationId: NotRequired[int]
    root: NotRequired[str]


class IndexStarted(TypedDict):
    """``IndexerService.start`` result: the task's id, and ``False`` in ``started`` when a run
    was already live in the session (its id is returned; a second run is not started)."""

    taskId: int
    started: bool


class IndexerServiceApi(Protocol):
    """Start indexing from anywhere (``pi.indexer``, remotable singleton)."""

    async def start(self, request: IndexRequest, ctx: Context) -> IndexStarted:
        """Create a background ``repo.indexer`` task, unless one is live; never waits for it."""
        ...


IndexerService: Service[IndexerServiceApi] = define_service("pi.indexer", IndexerServiceApi)
"""``pi.indexer``: provided by the indexer session facet, used by its TUI facet."""
