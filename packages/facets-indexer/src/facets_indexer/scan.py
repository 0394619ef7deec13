"""Scan a working tree the way git sees it, then cut the result into stable, resumable batches.

The indexer (docs/design/harness.md#task-kinds) checkpoints a *batch key* before it writes a batch and repeats the write
with the same key after a crash. That only works if a resumed scan regenerates the same batches, so
everything here is deterministic:

1. :func:`list_files` lists the files git would consider part of the working tree, with pico3's
   one ``.gitignore`` walker (:func:`pico3.walk_files`, the rules the coding agent's tools use)
   scoped the way ``git ls-files`` from a repository's top sees it: the root's ``.gitignore``
   files at every level and its ``.git/info/exclude``, none of the folders above it, and no
   nested repository's files. When ``git`` is installed and *root* is the top of a repository,
   ``git ls-files -co --exclude-standard`` is used instead; both produce the same sorted list for
   an untracked tree (tracked files are listed by git even if a pattern matches them, which is
   git's rule). Global excludes (``core.excludesFile``) are deliberately ignored by both paths so
   the result does not depend on who runs the scan. git runs through :func:`pico3.run_git`,
   which switches off everything a repository can make git run (``core.fsmonitor``, hooks,
   filter drivers): listing a cloned stranger's repository runs none of its code.
2. :func:`scan` keeps regular files no larger than ``max_file_bytes`` whose first
   :data:`SNIFF_BYTES` contain no NUL byte (git's own "is this binary" test).
3. :func:`make_batches` cuts the sorted list into batches of ``batch_size`` files. A batch's key is
   ``"<ordinal>-<fingerprint>"`` where the fingerprint hashes every path, size and ``mtime_ns`` in
   the batch: the same tree gives the same keys, and touching a file changes its batch's key.
4. :func:`batches_after` answers "what is left after the batch I checkpointed?".

Everything here blocks on the file system; async callers run it in a worker thread
(``anyio.to_thread.run_sync``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pico3 import run_git, walk_files

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_FILE_BYTES",
    "SNIFF_BYTES",
    "Batch",
    "ScannedFile",
    "batches_after",
    "list_files",
    "make_batches",
    "read_batch",
    "scan",
    "scan_batches",
]

DEFAULT_MAX_FILE_BYTES = 1 << 20
"""Files larger than this (1 MiB) are not indexed."""

DEFAULT_BATCH_SIZE = 64
"""Files per batch: small enough to commit quickly, large enough to amortise a transaction."""

SNIFF_BYTES = 8000
"""How much of a file is searched for a NUL byte to call it binary (the figure git uses)."""


@dataclass(frozen=True, slots=True)
class ScannedFile:
    """One file to index: its POSIX path relative to the root, size and modification time."""

    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Batch:
    """A run of consecutive scanned files with a key that names exactly this content."""

    ordinal: int
    key: str
    files: tuple[ScannedFile, ...]


def _walk(root: Path) -> list[str]:
    return sorted(walk_files(root, ancestors=False, nested_repositories=False))


def _git(root: Path, *args: str) -> bytes | None:
    """Run git in *root* and return its stdout, or ``None`` if git is missing or fails.

    Through :func:`pico3.run_git`, always (trusted project or not): nothing the repository
    configures runs (``core.fsmonitor``, hooks, filter drivers), and the user's global
    excludes are ignored."""
    try:
        done = run_git(root, *args)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _git_list(root: Path) -> list[str] | None:
    if not (root / ".git").exists():
        return None
    # Only at the top of a repository: from a subdirectory git would also apply the parents'
    # .gitignore files, which the walk does not read. (Failure covers "dubious ownership" too.)
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(os.fsdecode(top.strip())).resolve() != root.resolve():
        return None
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None:
        return None
    paths = {
        os.fsdecode(raw)
        for raw in listed.split(b"\0")
        if raw and not raw.endswith(b"/")  # "dir/" is an untracked nested repository
    }
    return sorted(paths)


def list_files(root: str | os.PathLike[str], *, use_git: bool | None = None) -> list[str]:
    """List the non-ignored files under *root* as sorted POSIX paths relative to it.

    ``use_git=None`` tries ``git ls-files`` and falls back to the pure-Python walk; ``True``
    requires git (``RuntimeError`` when it cannot be used); ``False`` always walks.
    Entries are not stat-ed here: a listed path may be a symlink or already gone.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise NotADirectoryError(f"cannot scan {str(root_path)!r}: not a directory")
    if use_git is not False:
        listed = _git_list(root_path)
        if listed is not None:
            return listed
        if use_git:
            raise RuntimeError(
                f"git cannot list {str(root_path)!r} (not installed or not a repo top)"
            )
    return _walk(root_path)


# ---------------------------------------------------------------------------------------------
# Filtering and batching


def _looks_binary(path: Path) -> bool:
    with path.open("rb") as f:
        return b"\0" in f.read(SNIFF_BYTES)


def scan(
    root: str | os.PathLike[str],
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    use_git: bool | None = None,
) -> list[ScannedFile]:
    """The indexable files under *root*: listed, regular (no symlinks), small enough, not binary."""
    if max_file_bytes < 0:
        raise ValueError(f"max_file_bytes must be >= 0, got {max_file_bytes}")
    root_path = Path(root)
    kept: list[ScannedFile] = []
    for rel in list_files(root_path, use_git=use_git):
        path = root_path / rel
        try:
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_file_bytes:
                continue
            if _looks_binary(path):
                continue
        except OSError:
            continue  # vanished or unreadable between listing and stat: not part of this scan
        kept.append(ScannedFile(rel, st.st_size, st.st_mtime_ns))
    return kept


def _fingerprint(files: Iterable[ScannedFile]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.path}\0{f.size}\0{f.mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:20]


def make_batches(
    files: Sequence[ScannedFile], *, batch_size: int = DEFAULT_BATCH_SIZE
) -> list[Batch]:
    """Cut *files* (in the given order) into batches of *batch_size* with stable keys."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out: list[Batch] = []
    for ordinal, start in enumerate(range(0, len(files), batch_size)):
        chunk = tuple(files[start : start + batch_size])
        out.append(Batch(ordinal, f"{ordinal:06d}-{_fingerprint(chunk)}", chunk))
    return out


def scan_batches(
    root: str | os.PathLike[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    use_git: bool | None = None,
) -> list[Batch]:
    """:func:`scan` followed by :func:`make_batches`."""
    return make_batches(
        scan(root, max_file_bytes=max_file_bytes, use_git=use_git), batch_size=batch_size
    )


def batches_after(batches: Sequence[Batch], cursor: str | None) -> list[Batch]:
    """The batches still to write after the batch keyed *cursor* (all of them for ``None``).

    If the tree changed since the cursor was saved, its key no longer names the batch at that
    ordinal and every batch is returned: the store skips keys it already holds, so restarting
    costs only the batches that really changed.
    """
    if cursor is None:
        return list(batches)
    for index, batch in enumerate(batches):
        if batch.key == cursor:
            return list(batches[index + 1 :])
    return list(batches)


def read_batch(root: str | os.PathLike[str], batch: Batch) -> list[tuple[str, str]]:
    """Read a batch's files as ``(path, text)``, decoding UTF-8 with replacement characters.

    A file that disappeared since the scan is left out (the next scan's prune removes it).
    """
    root_path = Path(root)
    out: list[tuple[str, str]] = []
    for f in batch.files:
        try:
            data = (root_path / f.path).read_bytes()
        except OSError:
            continue
        out.append((f.path, data.decode("utf-8", errors="replace")))
    return out
