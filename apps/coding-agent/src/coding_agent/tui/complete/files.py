"""The project's file list for ``@file`` mentions: scanned off the UI thread, cached briefly.

Scanning a tree costs far more than a keystroke may, so :class:`FileIndex` keeps the newest
list and rescans only when asked after the list is older than ``max_age`` seconds. The scan
runs in a worker thread (:func:`anyio.to_thread.run_sync`); until it finishes the editor keeps
showing the previous list, and concurrent requests share one scan.

:func:`scan_files` walks breadth first, so a huge folder deep down cannot crowd out the files
near the root, and stops after ``limit`` files. It honours ``.gitignore`` exactly as the agent's
own ``find`` and ``ls`` tools do (the same walker, :func:`pico3.walk_files`) and never enters
``.git``, ``node_modules`` or ``.venv``, ignored or not. Symlinked folders are not followed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import anyio
import anyio.to_thread

__all__ = ["MAX_FILES", "SKIPPED_DIRS", "FileIndex", "scan_files"]

MAX_FILES = 20_000
"""The most files one scan collects."""

SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__"})
"""Folders never entered, whatever the ignore files say."""

_MAX_ENTRIES_FACTOR = 10  # entries looked at per file wanted: bounds folder-only trees


def scan_files(
    root: Path, *, limit: int = MAX_FILES, skip_dirs: frozenset[str] = SKIPPED_DIRS
) -> list[str]:
    """Up to ``limit`` not-ignored files under ``root`` as ``/``-separated relative paths.

    Breadth first, each folder's entries in name order. A missing or unreadable ``root`` (or
    folder below it) contributes nothing rather than failing.
    """
    from pico3 import walk_files  # pathspec: load it off the UI

    walk = walk_files(
        root,
        skip_dirs=skip_dirs,
        breadth_first=True,
        max_entries=max(limit, 1) * _MAX_ENTRIES_FACTOR,
    )
    return list(islice(walk, max(limit, 0)))


class FileIndex:
    """The cached file list of one project folder."""

    def __init__(
        self,
        root: Path,
        *,
        limit: int = MAX_FILES,
        max_age: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.limit = limit
        self.max_age = max_age
        self._clock = clock
        self._files: tuple[str, ...] = ()
        self._scanned_at: float | None = None
        self._scan_done: anyio.Event | None = None

    @property
    def files(self) -> tuple[str, ...]:
        """The newest list scanned (empty before the first scan finishes)."""
        return self._files

    @property
    def scanning(self) -> bool:
        """Whether a scan is running now."""
        return self._scan_done is not None

    @property
    def stale(self) -> bool:
        """Whether the list is missing or older than ``max_age`` (a refresh would rescan)."""
        return self._scanned_at is None or self._clock() - self._scanned_at >= self.max_age

    async def refresh(self) -> tuple[str, ...]:
        """Rescan if stale (joining a scan already running) and return the newest list."""
        if self._scan_done is not None:
            await self._scan_done.wait()
            return self._files
        if not self.stale:
            return self._files
        done = self._scan_done = anyio.Event()
        try:
            files = await anyio.to_thread.run_sync(
                lambda: scan_files(self.root, limit=self.limit), abandon_on_cancel=True
            )
            self._files = tuple(files)
            self._scanned_at = self._clock()
        finally:
            self._scan_done = None
            done.set()
        return self._files
