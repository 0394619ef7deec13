"""The entries that run code, found in the folders of a tree: :func:`find_entries`; which of
them a command made (:func:`planted_entries`).

A sandboxed command may change the project, but not what makes code run outside it later. At
the project's top that is a fixed list of paths (``.vscode``, ``.claude``, the repository's
``.git``); in its folders it is the same names wherever they are: ``packages/web/.vscode``
(VS Code runs its tasks when the user opens ``packages/web``), ``services/api/.claude`` (this
agent, or Claude Code, started there runs its hooks), the ``.git`` of a clone two folders down
(git runs its ``core.fsmonitor`` at the user's next ``git status`` there).
:attr:`pico3.SandboxPolicy.read_only_names` names them, and the sandbox binds each one found
read-only, each time a command is wrapped.

The walk goes :data:`SCAN_DEPTH` folders down (``a/b/.vscode``: about as deep as Claude Code's
sandbox searches, three path levels with ripgrep), never into a link, into what it found (a
``.git``'s insides), or into a folder named in :data:`SKIPPED` (``node_modules``: packages,
never opened as projects), and stops after :data:`SCAN_LIMIT` folders (level by level: the
shallower ones first). Looking again costs one ``stat`` per folder, not one listing: each
folder's listing is kept with its inode and modification time, and read again only when they
change (a new entry, a rename, a removal each change the folder's time). A folder changed within
:data:`_RECENT_NS` of the look is read again the next time too: a file system's clock ticks
coarsely, so two changes within one tick leave one time.

A command can still make such an entry where none was (no bind mount can lie over a path that
does not exist): :func:`planted_entries` compares two looks, before and after the command, and
names what appeared with something in it.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple

__all__ = [
    "SCAN_DEPTH",
    "SCAN_LIMIT",
    "SKIPPED",
    "find_entries",
    "holds_something",
    "planted_entries",
]

SCAN_DEPTH = 2
"""How many folders below the tree the walk looks (``a/b/.vscode`` is found, ``a/b/c/``'s are
not)."""

SCAN_LIMIT = 5_000
"""The most folders one walk looks at: a larger tree is covered in part, level by level (its
folders one down first, then two down...), and a look costs at most a few ms."""

SKIPPED: frozenset[str] = frozenset({"node_modules"})
"""Folders the walk never enters: installed packages, which nobody opens as a project."""

_RECENT_NS = 2_000_000_000
"""A folder changed this recently (ns) is listed again at the next look (coarse clocks)."""

_KEPT = 50_000
"""The most folder listings kept (all are dropped past it, and read again as needed)."""


class _Listing(NamedTuple):
    """One folder as last read: what it was, its subfolders to walk, the entries found."""

    stamp: tuple[int, int]  # (inode, modification time in ns)
    folders: tuple[str, ...]
    found: tuple[str, ...]


_LISTINGS: dict[tuple[frozenset[str], str], _Listing] = {}


def find_entries(
    tree: str | os.PathLike[str], names: Collection[str], *, depth: int = SCAN_DEPTH
) -> list[str]:
    """Every file, folder or link named one of ``names`` in the folders of ``tree`` down to
    ``depth`` below it (``tree``'s own are not looked at: the caller names those), as
    absolute paths under ``tree`` resolved (module doc). A folder that cannot be read is
    passed over."""
    wanted = frozenset(names)
    level = [os.path.realpath(tree)]
    found: list[str] = []
    seen = 0
    now = time.time_ns()
    for down in range(depth + 1):  # the folders ``down`` below the tree
        below: list[str] = []
        for folder in level:
            if seen >= SCAN_LIMIT:
                return found
            seen += 1
            listing = _listing(folder, wanted, now)
            if listing is None:
                continue
            if down:
                found += listing.found
            below += listing.folders
        level = below
    return found


def _listing(folder: str, wanted: frozenset[str], now: int) -> _Listing | None:
    """``folder``'s listing: the kept one while the folder is unchanged, else read now."""
    try:
        status = os.stat(folder, follow_symlinks=False)
    except OSError:
        return None
    stamp = (status.st_ino, status.st_mtime_ns)
    key = (wanted, folder)
    kept = _LISTINGS.get(key)
    if kept is not None and kept.stamp == stamp:
        return kept
    folders: list[str] = []
    found: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name in wanted:
                    found.append(entry.path)
                elif entry.name not in SKIPPED and _is_folder(entry):
                    folders.append(entry.path)
    except OSError:
        return None
    listing = _Listing(stamp, tuple(folders), tuple(found))
    if now - status.st_mtime_ns > _RECENT_NS:  # else read again next time (module doc)
        if len(_LISTINGS) >= _KEPT:
            _LISTINGS.clear()  # one call, safe beside another thread's wrap; refilled as read
        _LISTINGS[key] = listing
    else:
        _LISTINGS.pop(key, None)
    return listing


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def holds_something(path: str) -> bool:
    """Whether ``path`` is a file (or a link), or a folder with something in it; one that
    exists but cannot be read counts. An empty folder runs nothing: git passes over an empty
    ``.git`` (a sandbox placeholder is one), VS Code over an empty ``.vscode``.

    Decided from one ``lstat``, then the listing: a sandbox placeholder its watcher removes as
    the command ends may go at any moment of the look, and a path gone is nothing there (two
    separate tests, "exists" then "is a folder", read a folder removed in between as a file)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there, but unreadable: whatever reads it would say so
    if not stat.S_ISDIR(mode):
        return True  # a file or a link
    try:
        with os.scandir(path) as listing:
            return next(listing, None) is not None
    except FileNotFoundError:
        return False  # gone meanwhile; whatever is put there later is the next look's
    except NotADirectoryError:
        return True  # a file put in its place
    except OSError:
        return True


def entry_identities(paths: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Each of ``paths`` with its ``(device, inode)``, the link itself not followed (a path
    gone by now is left out): what :func:`planted_entries` compares against."""
    found: dict[str, tuple[int, int]] = {}
    for path in paths:
        try:
            status = os.lstat(path)
        except OSError:
            continue
        found[path] = (status.st_dev, status.st_ino)
    return found


def planted_entries(before: Mapping[str, tuple[int, int]], after: Iterable[str]) -> list[str]:
    """The paths of ``after`` that hold something (:func:`holds_something`) and were not among
    ``before``'s entries, in ``after``'s order: what a command made among the entries the
    sandbox keeps read-only, given :func:`entry_identities` of
    :meth:`pico3.SandboxPolicy.kept_read_only` before it and that method's answer after it.

    An entry is known by its identity, not its path: a folder renamed with a protected entry in
    it (``mv sub sub_orig``) moves that entry, which is not new; what then appears at the old
    path (``git init sub``) is, though the path is the same. From then on each exists, so
    every later command gets it read-only."""
    known = set(before.values())
    planted: list[str] = []
    for path, identity in entry_identities(after).items():
        if identity not in known and holds_something(path):
            planted.append(path)
    return planted
