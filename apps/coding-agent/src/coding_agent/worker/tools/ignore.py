"""Which files a search should skip: ``.gitignore`` rules in pure Python.

grep and find use ripgrep when it is on the path; this module is their fallback and the rule
set ``ls`` applies. It mirrors ripgrep run with ``--hidden --no-require-git --no-ignore-dot``:

* every ``.gitignore`` from the search root down applies to the paths below its folder, and so do
  the ``.gitignore`` files of all the root's ancestors (ripgrep with ``--no-require-git`` does
  not stop at the repository top, so neither do we), plus the nearest repository's
  ``.git/info/exclude``;
* a deeper file's rule wins over a shallower one, and within a file the last matching pattern
  wins (``!`` re-includes), as in git; an ignored folder is not entered, so nothing inside it
  can be re-included;
* hidden files are searched, ``.git`` folders never; symlinked folders are not followed.

Patterns are interpreted by ``pathspec``'s git-wildmatch implementation.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pathspec

__all__ = ["IgnoreRules", "walk_files"]

_ALWAYS_SKIPPED = frozenset({".git"})


def _load(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


class IgnoreRules:
    """The ignore rules in force below ``root``; ask :meth:`ignored` about any path under it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._outer: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
        repository_seen = False
        if (root / ".git").exists():
            repository_seen = True
            exclude = _load(root / ".git" / "info" / "exclude")
            if exclude is not None:
                self._outer.append((root, exclude))
        folder = root.parent
        while folder != root and folder.parent != folder:
            spec = _load(folder / ".gitignore")
            if spec is not None:
                self._outer.append((folder, spec))
            if not repository_seen and (folder / ".git").exists():
                repository_seen = True
                exclude = _load(folder / ".git" / "info" / "exclude")
                if exclude is not None:
                    self._outer.append((folder, exclude))
            folder = folder.parent

    def _spec(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._specs:
            self._specs[folder] = _load(folder / ".gitignore")
        return self._specs[folder]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether ``path`` (under the root) is ignored; the deepest rule that matches decides."""
        if path.name in _ALWAYS_SKIPPED:
            return True
        layers: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
        folder = path.parent
        while True:
            spec = self._spec(folder)
            if spec is not None:
                layers.append((folder, spec))
            if folder == self.root or folder.parent == folder:
                break
            folder = folder.parent
        layers.extend(reversed(self._outer))  # innermost ancestor first
        for base, spec in layers:
            try:
                relative = path.relative_to(base).as_posix()
            except ValueError:
                continue
            result = spec.check_file(relative + "/" if is_dir else relative)
            if result.include is not None:
                return result.include
        return False


def walk_files(
    root: Path,
    *,
    skip_dirs: frozenset[str] = frozenset(),
    breadth_first: bool = False,
    max_entries: int | None = None,
) -> Iterator[str]:
    """Yield the not-ignored files under ``root`` as ``/``-separated relative paths.

    Each folder's entries come in name order. Depth first by default (ripgrep's ``--sort
    path``); ``breadth_first`` lists every file of a level before going deeper, so a huge folder
    far down cannot crowd out the files near the root when the caller stops early. Folders
    named in ``skip_dirs`` are skipped too, like ``node_modules`` for find. ``max_entries``
    bounds the directory entries looked at (checked before each folder is listed), so a tree of
    folders with few files still ends. Unreadable folders contribute nothing.
    """
    rules = IgnoreRules(root)
    budget = -1 if max_entries is None else max_entries

    def listing(folder: Path) -> list[tuple[Path, bool]]:
        nonlocal budget
        try:
            with os.scandir(folder) as entries:
                items = sorted(entries, key=lambda entry: entry.name)
        except OSError:
            return []
        kept: list[tuple[Path, bool]] = []
        for entry in items:
            budget -= 1
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            path = Path(entry.path)
            if (is_dir and entry.name in skip_dirs) or rules.ignored(path, is_dir):
                continue
            kept.append((path, is_dir))
        return kept

    def exhausted() -> bool:
        return max_entries is not None and budget <= 0

    def visit(folder: Path) -> Iterator[str]:
        for path, is_dir in listing(folder):
            if not is_dir:
                yield path.relative_to(root).as_posix()
            elif not exhausted():
                yield from visit(path)

    if not breadth_first:
        yield from visit(root)
        return
    folders: deque[Path] = deque([root])
    while folders and not exhausted():
        for path, is_dir in listing(folders.popleft()):
            if is_dir:
                folders.append(path)
            else:
                yield path.relative_to(root).as_posix()
