"""What every side of the indexer feature agrees on, with no host imports (seed §4.3, §6.2).

The session facet registers the ``repo.indexer`` task kind; its ``describe()`` publishes an
:class:`IndexerStatus` as ``view.tasks[id].status``, which is all a presentation facet needs to
render progress. The index itself lives in the session's state folder as :data:`INDEX_FILE_NAME`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "INDEXER_KIND",
    "INDEX_FILE_NAME",
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
