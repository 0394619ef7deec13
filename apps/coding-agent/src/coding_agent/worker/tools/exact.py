"""Writing a file exactly where a path resolved, never through a symlink that appeared since.

An edit is approved for its target's *real* path (symlinks followed), and written later. A
process that swaps a folder on the way for a symlink in between (``d`` ↔ ``s -> .git``,
``rename(2)`` in a loop) would make a plain ``open(path, "w")`` follow the new link and write
somewhere nobody checked (``.git/config``, ``$HOME``). Here the target is resolved once, by the
caller, to a real path; then every folder of that path is opened from ``/`` with
``O_NOFOLLOW`` relative to the previous one (:func:`open_folder`), so a component that is now a
symlink (or no longer a folder) fails the call, and the file is created in the last folder's
descriptor, whatever happens to the names above it meanwhile: a temporary file written and
``fsync``-ed there, renamed over the name (``renameat``: never follows a link), the folder
``fsync``-ed (:func:`write_exact`). An existing file keeps its permission bits; a new one gets
``0o666`` less the umask, as ``open`` gives. Being a rename, a write never changes another hard
link of the file, nor a file a link planted at the name itself.

Reading is the same walk (:func:`open_exact`): the folders of the real path from ``/``, then the
file itself opened with ``O_NOFOLLOW`` in the last folder's descriptor, so a ``read`` approved
(or let through) for ``d/notes.txt`` cannot return ``~/.ssh/id_rsa`` because ``d`` became a
link meanwhile. One walk, one owner: writes, deletions and reads all reach a folder through
:func:`open_folder`.

What stays possible, and is no escalation: a process moving the opened folder itself elsewhere
(``rename(2)`` of ``d`` into ``.git``) needs write access to the destination, where it could write
the file itself.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable

__all__ = ["TargetChanged", "open_exact", "open_folder", "remove_exact", "write_exact"]

_FOLDER = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class TargetChanged(OSError):
    """A folder on the way to the target is a symlink (or not a folder) now: the path no longer
    leads where it resolved, so nothing was written."""

    def __init__(self, path: str, component: str, why: str) -> None:
        super().__init__(errno.ELOOP, f"{path} changed while the call ran ({why}: {component})")
        self.path = path
        self.component = component
        self.why = why


def _components(folder: str) -> list[str]:
    if not os.path.isabs(folder) or os.path.normpath(folder) != folder:
        raise ValueError(f"not an absolute, normalised path: {folder!r}")
    return [part for part in folder.split(os.sep) if part]


def open_folder(folder: str, *, create: bool = False, target: str | None = None) -> int:
    """A descriptor of the folder ``folder`` (absolute, real), reached from ``/`` one component
    at a time without following a symlink; ``create`` makes missing folders (``mkdir -p``).
    Raises :class:`TargetChanged` when a component is a symlink or not a folder (``target``
    names the path in its message), ``FileNotFoundError`` when one is missing."""
    fd = os.open(os.sep, _FOLDER)
    walked = os.sep
    try:
        for name in _components(folder):
            walked = os.path.join(walked, name)
            try:
                child = os.open(name, _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                child = _open_child(fd, name, walked, target or folder)
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise _changed(fd, name, walked, target or folder) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child(fd: int, name: str, walked: str, target: str) -> int:
    try:
        return os.open(name, _FOLDER, dir_fd=fd)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        raise _changed(fd, name, walked, target) from None


def _changed(fd: int, name: str, walked: str, target: str) -> TargetChanged:
    try:
        link = stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode)
    except OSError:
        link = True  # gone again: it was swapped
    why = "a symlink appeared on the way" if link else "a folder on the way is not a folder"
    return TargetChanged(target, walked, why)


def _split(real: str) -> tuple[str, str]:
    folder, name = os.path.split(real)
    if not name or name in (".", ".."):
        raise IsADirectoryError(errno.EISDIR, "not a file path", real)
    return folder, name


def write_exact(
    real: str, data: bytes, *, create_folders: bool = False, fsync: bool = True
) -> None:
    """Make ``data`` the content of the file ``real`` (an absolute path, symlinks already
    resolved by the caller), atomically and without following a symlink anywhere on the way
    (see the module). ``create_folders`` makes missing folders. Raises :class:`TargetChanged`
    when a folder of ``real`` is now a symlink or the name itself became one (nothing is
    written), ``IsADirectoryError`` for a folder, other ``OSError`` as the system says."""
    folder, name = _split(real)
    fd = open_folder(folder, create=create_folders, target=real)
    try:
        keep: int | None = None
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None:
            if stat.S_ISLNK(info.st_mode):
                raise TargetChanged(real, real, "a symlink appeared on the way")
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), real)
            keep = stat.S_IMODE(info.st_mode)
        temporary = _temporary(fd, name)
        try:
            out = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o666,
                dir_fd=fd,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
                if keep is not None:
                    os.fchmod(out, keep)
                if fsync:
                    os.fsync(out)
            finally:
                os.close(out)
            os.rename(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=fd)
            except OSError:
                pass
            raise
        if fsync:
            _sync_folder(fd, folder)
    finally:
        os.close(fd)


def open_exact(real: str, *, check: Callable[[os.stat_result], None] | None = None) -> int:
    """A read-only descriptor of the file ``real`` (an absolute path, symlinks already resolved
    by the caller), reached without following a symlink anywhere on the way (see the module).

    ``check`` sees the name's own ``lstat`` before it is opened (to refuse a device or a FIFO
    without opening it: opening some devices has effects); what it raises propagates. The
    descriptor is non-blocking (``O_NONBLOCK``: a FIFO swapped in cannot hang the open); make it
    blocking to read. Raises :class:`TargetChanged` when a folder of ``real`` is now a symlink
    (or not a folder) or the name itself became one (nothing was opened),
    ``IsADirectoryError`` for ``/``, ``FileNotFoundError`` and other ``OSError`` as the system
    says."""
    folder, name = _split(real)
    fd = open_folder(folder, target=real)
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise TargetChanged(real, real, "a symlink appeared on the way")
        if check is not None:
            check(info)
        try:
            return os.open(name, _READ, dir_fd=fd)
        except OSError as error:
            if error.errno != errno.ELOOP:  # O_NOFOLLOW: the name became a link since its stat
                raise
            raise TargetChanged(real, real, "a symlink appeared on the way") from None
    finally:
        os.close(fd)


def remove_exact(real: str) -> None:
    """Delete the file ``real`` (absolute, real) without following a symlink on the way; a
    missing file is no error. Raises :class:`TargetChanged` as :func:`write_exact` does."""
    folder, name = _split(real)
    try:
        fd = open_folder(folder, target=real)
    except FileNotFoundError:
        return
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


def _temporary(fd: int, name: str) -> str:
    stem = name[:200]
    while True:
        candidate = f".{stem}.{secrets.token_hex(4)}.tmp"
        try:
            os.stat(candidate, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return candidate  # O_EXCL settles a collision with a name made since


def _sync_folder(fd: int, folder: str) -> None:
    """``fsync`` the folder (an ``O_PATH`` descriptor cannot be synced: one opened for it is)."""
    try:
        synced = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return
    try:
        os.fsync(synced)
    except OSError:  # pragma: no cover - a file system without folder fsync
        pass
    finally:
        os.close(synced)
