"""Tab completion of a path being typed, shell style.

The word before the cursor *looks like a path* when it contains a ``/`` (which covers ``./``,
``../``, ``~/`` and absolute paths). Completing it lists the entries of the folder it names
(relative paths start from the session's working folder, ``~`` is the home folder) whose names
start with what follows the last ``/``. Dot entries show up only when that part starts with
``.``. Folders come back with a trailing ``/`` so the next Tab descends into them.

The completions keep the word's own spelling of the folder (``~/src/`` stays ``~/src/``, not an
absolute path), so accepting one only ever extends what the user typed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["common_prefix", "complete_path", "looks_like_path"]

_MAX_MATCHES = 200


def looks_like_path(word: str) -> bool:
    """Whether Tab should complete ``word`` as a path."""
    return "/" in word


def common_prefix(words: Iterable[str]) -> str:
    """The longest prefix every word starts with (empty for no words)."""
    items = list(words)
    if not items:
        return ""
    first, last = min(items), max(items)
    size = 0
    while size < len(first) and first[size] == last[size]:
        size += 1
    return first[:size]


def complete_path(word: str, cwd: Path, *, limit: int = _MAX_MATCHES) -> list[str]:
    """The completions of ``word`` (each the whole word, folders ending in ``/``), sorted.

    An unreadable or missing folder has no completions. At most ``limit`` are returned.
    """
    head, _, prefix = word.rpartition("/")
    folder_text = head + "/"
    folder = Path(os.path.expanduser(folder_text))
    if not folder.is_absolute():
        folder = cwd / folder
    matches: list[str] = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                name = entry.name
                if not name.startswith(prefix) or (
                    name.startswith(".") and not prefix.startswith(".")
                ):
                    continue
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                matches.append(folder_text + name + ("/" if is_dir else ""))
    except OSError:
        return []
    matches.sort()
    return matches[:limit]
