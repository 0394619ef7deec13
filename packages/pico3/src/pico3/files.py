"""Durable small-file writes: the one way this tree replaces a file's content.

:func:`write_atomic` is what every metadata file (``session.json``, the trust store, a session's
name, a process host's records, file-history blobs and restores) is written with. It writes a
temporary file next to the target, ``fsync``\\s it, renames it over the target and ``fsync``\\s
the folder, so after a crash the path holds either the old content or the new, never a torn
or empty file, and the rename itself is on stable storage when the call returns. A failure
removes the temporary and raises; the old content stays.

:func:`fsync_dir` makes a folder's entries durable (after creating or renaming files in it).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["fsync_dir", "write_atomic"]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """``fsync`` the folder ``path``: the names created, renamed or removed in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    mode: int | None = 0o600,
    fsync: bool = True,
) -> None:
    """Replace the content of ``path`` with ``data`` (``str`` is UTF-8) atomically.

    The temporary (``.<name>.<random>.tmp`` in the same folder, created exclusively with
    ``mode``) is written, ``fsync``-ed, renamed over ``path`` and the folder ``fsync``-ed.
    ``mode`` is the new file's permission bits (default: private, ``0o600``); ``None`` keeps
    those of the file being replaced (a new file gets ``0o666`` less the umask, as ``open``
    gives). ``fsync=False`` skips both syncs (tests and
    ``--no-fsync`` runs), keeping the rename's atomicity against other processes.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    create_mode = 0o666 if mode is None else mode
    keep: int | None = None
    if mode is None:
        try:
            keep = target.stat().st_mode & 0o7777
        except OSError:
            keep = None
    while True:
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, create_mode)
            break
        except FileExistsError:  # pragma: no cover - a 32-bit name collision
            continue
    try:
        with open(fd, "wb") as file:
            file.write(payload)
            file.flush()
            if keep is not None:
                os.fchmod(file.fileno(), keep)
            if fsync:
                os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(target.parent)
