"""Which files of a project a tool should see: ``.gitignore`` rules, on ``pathspec``'s public API.

One walker serves every consumer (the coding agent's grep, find, ls and ``@file`` completion, the
indexer's scan), so a pattern means the same thing everywhere. The rules are git's:

* a ``.gitignore`` applies to the paths below its folder; a deeper file's rule wins over a
  shallower one, and within a file the last matching pattern wins (``!`` re-includes);
* a pattern matching the path itself beats one that matches only a folder above it (so ``*``
  followed by ``!*/`` keeps ignoring files while every folder is entered); a pattern ending in
  ``/`` matches folders only, and ``a/**/`` every folder *below* ``a`` (not ``a``);
* an ignored folder is not entered, so nothing inside it can be re-included;
* ``.git`` (folder or file) is never listed, symlinked folders are never followed, hidden files
  are listed; a pattern ``pathspec`` cannot compile is skipped, as git skips it.

What differs between consumers is only *which* ignore files are in force, chosen explicitly:

``ancestors=True`` (the default: ripgrep's ``--no-require-git``)
    the ``.gitignore`` files of every folder above the root apply too, and the
    ``.git/info/exclude`` of the nearest repository at or above the root;
``ancestors=False`` (``git ls-files`` from a repository's top)
    only the root and what is below it, and the root's own ``.git/info/exclude``.

``nested_repositories=False`` skips a folder holding a ``.git`` entry (git lists a nested
repository as a folder of its own, not its files); by default it is walked like any folder.

Matching uses :class:`pathspec.GitIgnoreSpec` (its ``check_file``, which implements git's
file-beats-folder priority) and nothing of pathspec's internals.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec  # imported at the first compile (~15 ms): importers of walk_files pay at use

__all__ = ["IgnoreRules", "walk_files"]

_ALWAYS_SKIPPED = frozenset({".git"})

_GLOB = frozenset("\\*?[")
"""Characters a folder name must have escaped when it becomes part of a pattern."""


def _trimmed(line: str) -> str:
    """``line`` without git's ignored trailing blanks (an escaped one, ``\\ ``, stays)."""
    end = len(line)
    while end and line[end - 1] in " \t" and not (end > 1 and line[end - 2] == "\\"):
        end -= 1
    return line[:end]


def _escaped(base: str) -> str:
    out = "".join(f"\\{c}" if c in _GLOB else c for c in base)
    return f"\\{out}" if out[:1] in ("!", "#") else out


def _rooted(line: str, base: str) -> str | None:
    """One ``.gitignore`` line of the folder ``base`` (``/``-separated, relative to the top the
    paths are checked from; ``""`` for the top itself) as a pattern read from the top, or
    ``None`` for a blank line or a comment. Git's ``a/**/`` (every folder *below* ``a``) becomes
    ``a/*/``: pathspec folds ``a/**/`` into ``a/``, which would match ``a`` too, and the folders
    further down are inside an ignored one, which is never entered."""
    line = _trimmed(line)
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    body = line[1:] if negated else line
    if not body.strip("/"):
        return None  # "!" or "/" alone matches nothing
    if base:
        anchored = "/" in body.rstrip("/")
        body = f"{_escaped(base)}/{body.lstrip('/')}" if anchored else f"{_escaped(base)}/**/{body}"
    if body.endswith("/**/") and not body.endswith("\\/**/"):
        body = body[: -len("**/")] + "*/"
    return f"!{body}" if negated else body


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> pathspec.GitIgnoreSpec | None:
    """``pattern`` compiled once (folders share their ancestors' patterns), or ``None`` when
    pathspec cannot compile it: git skips a pattern it cannot read, and so do we."""
    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines([pattern])
    except Exception:  # pathspec raises re.error or ValueError for a pattern it cannot compile
        return None


def _compile(patterns: Sequence[str]) -> pathspec.GitIgnoreSpec:
    import pathspec

    compiled = [spec for spec in map(_compiled, patterns) if spec is not None]
    return pathspec.GitIgnoreSpec([p for spec in compiled for p in spec.patterns])


def _as_folder_pattern(pattern: str) -> str:
    """A folder-only pattern (``build/``) as the pattern it is for a path known to be a folder
    (``build``), so a folder is checked as itself (see :class:`_Layered`)."""
    return pattern[:-1] if pattern.endswith("/") and not pattern.endswith("\\/") else pattern


class _Layered:
    """Every pattern in force in one folder, as one ``GitIgnoreSpec`` read from the top.

    Git's precedence across files (a deeper ``.gitignore`` overrides a shallower one, which
    overrides ``info/exclude``) is the order of one list: outer patterns first, re-rooted at the
    top, so ``GitIgnoreSpec``'s last-match rule and its file-beats-folder priority decide exactly
    as git does. A folder is checked without its trailing slash against ``folders``, where
    folder-only patterns lost theirs: with the slash, pathspec would take the folder's own match
    for a match of a folder above it, which a pattern matching the folder itself outranks.
    """

    __slots__ = ("_files", "_folders", "patterns")

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = patterns
        self._files: pathspec.GitIgnoreSpec | None = None
        self._folders: pathspec.GitIgnoreSpec | None = None

    def spec(self, folder: bool) -> pathspec.GitIgnoreSpec:
        """The spec to check a file, or a folder (compiled on first use)."""
        if folder:
            if self._folders is None:
                self._folders = _compile([_as_folder_pattern(p) for p in self.patterns])
            return self._folders
        if self._files is None:
            self._files = _compile(self.patterns)
        return self._files


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _holds_repository(folder: Path) -> bool:
    """Whether ``folder`` has a ``.git`` that may be a repository: a file (a worktree's or a
    submodule's) or a folder with something in it. An empty ``.git`` folder (the sandbox's
    placeholder while a command runs) is no repository, to git either: it passes over it."""
    entry = folder / ".git"
    try:
        with os.scandir(entry) as listing:
            return next(listing, None) is not None
    except NotADirectoryError:
        return True
    except OSError:
        return False


class IgnoreRules:
    """The ignore rules in force below ``root``; ask :meth:`ignored` about any path under it.

    ``ancestors`` chooses whether the folders above ``root`` contribute (module docstring).
    """

    def __init__(self, root: Path, *, ancestors: bool = True) -> None:
        self.root = root
        outer: list[tuple[Path, list[str]]] = []  # (folder, lines), outermost first
        exclude: tuple[Path, list[str]] | None = None
        if _holds_repository(root):
            exclude = (root, _lines(root / ".git" / "info" / "exclude"))
        folder = root.parent
        while ancestors and folder != root and folder.parent != folder:
            lines = _lines(folder / ".gitignore")
            if lines:
                outer.insert(0, (folder, lines))
            if exclude is None and _holds_repository(folder):
                exclude = (folder, _lines(folder / ".git" / "info" / "exclude"))
            folder = folder.parent
        sources = ([exclude] if exclude is not None else []) + outer
        tops = [folder for folder, lines in sources if lines]
        self._top = min(tops, key=lambda f: len(f.parts)) if tops else root
        patterns: list[str] = []
        for folder, lines in sources:
            base = self._base(folder)
            patterns.extend(p for p in (_rooted(line, base) for line in lines) if p is not None)
        self._outer = patterns
        self._layers: dict[Path, _Layered] = {}

    def _base(self, folder: Path) -> str:
        relative = folder.relative_to(self._top).as_posix()
        return "" if relative == "." else relative

    def _layer(self, folder: Path) -> _Layered:
        layer = self._layers.get(folder)
        if layer is None:
            inherited = (
                self._outer
                if folder == self.root or folder.parent == folder
                else self._layer(folder.parent).patterns
            )
            base = self._base(folder)
            own = [p for p in (_rooted(line, base) for line in _lines(folder / ".gitignore")) if p]
            if own or folder == self.root:
                layer = _Layered([*inherited, *own])
            else:
                layer = self._layer(folder.parent)
            self._layers[folder] = layer
        return layer

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether ``path`` (under the root, its folders not ignored) is ignored."""
        if path.name in _ALWAYS_SKIPPED:
            return True
        layer = self._layer(path.parent)
        relative = path.relative_to(self._top).as_posix()
        return bool(layer.spec(is_dir).check_file(relative).include)


def walk_files(
    root: Path,
    *,
    ancestors: bool = True,
    nested_repositories: bool = True,
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
    folders with few files still ends. Unreadable folders contribute nothing. ``ancestors`` and
    ``nested_repositories`` choose the ignore files in force (module docstring). A symlink is
    yielded as a file, whatever it points to.
    """
    rules = IgnoreRules(root, ancestors=ancestors)
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
            if is_dir and not nested_repositories and os.path.lexists(path / ".git"):
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
