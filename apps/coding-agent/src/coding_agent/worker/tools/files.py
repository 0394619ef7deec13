"""Opening files safely, and what a tool remembers about a file it read.

Two things the file tools share:

* :func:`open_regular` opens a path for reading only when it is a **regular file**. A FIFO, a
  character or block device (``/dev/zero``), a socket or a folder is refused with a message
  naming what it is; the open itself is non-blocking (``O_NONBLOCK``, so a FIFO without a writer
  cannot hang it) and runs in a worker thread bounded by :data:`OPEN_TIMEOUT` seconds, so a hung
  network mount cannot hang the call either. The path is a *real* path (:func:`real_target`),
  opened by the no-follow walk of :func:`~.exact.open_exact`: a symlink swapped in on the way
  since it was resolved fails the open instead of being followed.
* :class:`~.host.FileStamp` is a file's size, modification time and (up to
  :data:`~.host.HASH_LIMIT` bytes) SHA-256, recorded when ``read`` shows it and when ``write``/``edit`` write it. A
  :class:`~.host.ReadLedger` keeps the stamps of one conversation: ``edit`` and ``write`` of an
  existing file refuse unless the ledger holds a stamp that still matches the file on disk
  (:func:`check_fresh`). The worker's ledger is durable (a rewindable namespace of the
  conversation, :mod:`coding_agent.worker.tools_facet`); :class:`MemoryReadLedger` is the
  in-process one.

With an editor's buffers in the context (:class:`~.host.EditorFiles`, ``coding-agent acp``), a
text file's content is the editor's: :func:`editor_read` asks for it, :func:`buffer_fd` holds it
where ``read`` scans files, and the stamps of what was read or written from the editor are of
that text (:func:`check_fresh_text`, :func:`record_text`): size and SHA-256, as a stamp of the
disk compares them too, so a file whose buffer and disk agree is fresh either way.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import threading
from pathlib import Path

import anyio
import anyio.to_thread

from .exact import TargetChanged, open_exact, write_exact
from .host import HASH_LIMIT, EditorFiles, FileStamp, ReadLedger
from .spec import ToolContext, ToolError, resolve_path

__all__ = [
    "OPEN_TIMEOUT",
    "MemoryReadLedger",
    "buffer_fd",
    "changed_error",
    "check_fresh",
    "check_fresh_text",
    "describe_mode",
    "editor_read",
    "hash_fd",
    "ledger_key",
    "open_regular",
    "put_content",
    "read_whole",
    "real_root",
    "real_target",
    "record_text",
    "record_written",
]

OPEN_TIMEOUT = 10.0
"""Seconds an open (with its ``stat``) may take before the call gives up."""


_CHUNK = 1024 * 1024


def describe_mode(mode: int) -> str | None:
    """What a non-regular file is (``"a FIFO (named pipe)"``...), or ``None`` for a regular one."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refusal(shown: str, what: str) -> ToolError:
    if what == "a directory":
        return ToolError(f"{shown} is a directory, not a file. Use ls to list it.")
    return ToolError(
        f"Cannot read {shown}: it is {what}, not a regular file; reading it could block or never "
        f"end. Use bash with a bound if you need it (for example: head -c 1000 {shown})."
    )


def _os_error(shown: str, error: OSError, verb: str = "read") -> ToolError:
    if isinstance(error, FileNotFoundError):
        return ToolError(f"File not found: {shown}")
    if isinstance(error, PermissionError):
        return ToolError(f"Cannot {verb} {shown}: permission denied")
    if isinstance(error, IsADirectoryError):
        return ToolError(f"{shown} is a directory, not a file. Use ls to list it.")
    return ToolError(f"Cannot {verb} {shown}: {error.strerror or error}")


async def open_regular(
    path: str | os.PathLike[str],
    shown: str,
    *,
    open_timeout: float = OPEN_TIMEOUT,
    verb: str = "read",
) -> tuple[int, os.stat_result]:
    """Open the real path ``path`` read-only if it is a regular file, without following a
    symlink on the way (:func:`~.exact.open_exact`); returns the descriptor and its ``fstat``.

    Raises :class:`ToolError` naming ``shown`` for a missing file, a folder, a FIFO, a device, a
    socket, a permission problem, a symlink found on the way (the path changed since it was
    resolved: :func:`changed_error` with ``verb``, what the call does: ``"write"`` for the
    freshness read of ``write``/``edit``), or an open that did not
    finish within ``open_timeout`` seconds (the thread left behind closes the descriptor if its
    open ever completes)."""
    abandoned = threading.Event()
    real = os.fspath(path)

    def refuse_special(info: os.stat_result) -> None:
        what = describe_mode(info.st_mode)
        if what is not None:
            raise _refusal(shown, what)

    def open_it() -> tuple[int, os.stat_result]:
        fd = open_exact(real, check=refuse_special)
        try:
            info = os.fstat(fd)
            what = describe_mode(info.st_mode)  # replaced between stat and open?
            if what is not None:
                raise _refusal(shown, what)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        if abandoned.is_set():
            os.close(fd)
            raise ToolError("abandoned")
        return fd, info

    opened: tuple[int, os.stat_result] | None = None
    try:
        with anyio.move_on_after(open_timeout):
            opened = await anyio.to_thread.run_sync(open_it, abandon_on_cancel=True)
    except TargetChanged as error:  # a symlink, or a file, where a folder of the path was
        raise changed_error(shown, error, verb) from None
    except OSError as error:
        raise _os_error(shown, error) from None
    if opened is None:
        abandoned.set()
        raise ToolError(
            f"Cannot read {shown}: opening it did not finish within {open_timeout:g} seconds "
            "(a hung network mount or a special file?)"
        )
    return opened


async def read_whole(
    path: str | os.PathLike[str], shown: str, *, verb: str = "read"
) -> tuple[bytes, os.stat_result]:
    """A regular file's whole content and its ``fstat`` (see :func:`open_regular`: ``path`` is
    a real path)."""
    fd, info = await open_regular(path, shown, verb=verb)

    def read_all() -> bytes:
        with os.fdopen(fd, "rb") as file:
            return file.read()

    try:
        return await anyio.to_thread.run_sync(read_all), info
    except OSError as error:
        raise _os_error(shown, error) from None


def hash_fd(fd: int, size: int) -> str | None:
    """The SHA-256 of an open file's first ``size`` bytes (``None`` above :data:`HASH_LIMIT`)."""
    if size > HASH_LIMIT:
        return None
    digest = hashlib.sha256()
    offset = 0
    while True:
        chunk = os.pread(fd, _CHUNK, offset)
        if not chunk:
            return digest.hexdigest()
        digest.update(chunk)
        offset += len(chunk)


# -- stamps and the ledger -----------------------------------------------------------------------
class MemoryReadLedger:
    """A :class:`ReadLedger` held in memory (the worker's is durable)."""

    def __init__(self) -> None:
        self.stamps: dict[str, FileStamp] = {}

    async def get(self, key: str) -> FileStamp | None:
        return self.stamps.get(key)

    async def put(self, key: str, stamp: FileStamp) -> None:
        self.stamps[key] = stamp


def ledger_key(path: Path) -> str:
    """The key of ``path`` in a ledger: its real path (symlinks resolved), as text (``path``
    itself when resolving it fails: a link swapped while it was read)."""
    try:
        return os.path.realpath(path)
    except OSError:
        return os.fspath(path)


def _must_read(shown: str) -> ToolError:
    return ToolError(
        f"{shown} exists but has not been read in this conversation. Read it first with the "
        "read tool (its current content may differ from what you expect), then retry.",
        {"reason": "not_read"},
    )


def _changed(shown: str) -> ToolError:
    return ToolError(
        f"{shown} has changed on disk since you last read it (someone or something else modified "
        "it). Read it again with the read tool, then retry with its current content.",
        {"reason": "changed_since_read"},
    )


async def check_fresh(
    ledger: ReadLedger | None,
    path: Path,
    shown: str,
    info: os.stat_result,
    *,
    data: bytes | None = None,
    fd: int | None = None,
) -> None:
    """Refuse (raise :class:`ToolError`) a change of the existing file ``path`` unless
    ``ledger`` holds a stamp that matches it: same size, and the same mtime or (when both are
    known) the same SHA-256. ``data`` is the file's content when the caller read it already;
    otherwise ``fd`` is hashed when needed. No ledger: nothing is checked."""
    if ledger is None:
        return
    stamp = await ledger.get(ledger_key(path))
    if stamp is None:
        raise _must_read(shown)
    if stamp.size != info.st_size:
        raise _changed(shown)
    if stamp.sha256 is None:
        if stamp.mtime_ns != info.st_mtime_ns:
            raise _changed(shown)
        return
    if data is not None:
        current = hashlib.sha256(data).hexdigest()
    elif fd is not None:
        current = await anyio.to_thread.run_sync(hash_fd, fd, info.st_size)
    else:
        current = None
    if current is None:
        if stamp.mtime_ns != info.st_mtime_ns:
            raise _changed(shown)
        return
    if current != stamp.sha256:
        raise _changed(shown)


async def record_written(ledger: ReadLedger | None, path: Path, data: bytes) -> None:
    """After ``write``/``edit`` put ``data`` in ``path``: the agent knows it, so it counts as
    read (its new stamp goes in the ledger)."""
    if ledger is None:
        return
    try:
        info = await anyio.Path(path).stat()
    except OSError:
        return
    await ledger.put(ledger_key(path), FileStamp.of_bytes(info, data))


_DONE = {"write": "written", "read": "read", "search": "searched", "list": "listed"}


def real_target(path: Path, shown: str, checked: str | None, verb: str = "write") -> Path:
    """The real path a file tool works on: ``path`` resolved once, symlinks followed.
    ``checked`` is the real path the approval resolved the target to (``None``: none was
    checked); when the target leads elsewhere now, the call fails (:class:`ToolError`, saying
    ``Cannot <verb> ...``: ``"write"`` for ``write``/``edit``, ``"read"`` for ``read``,
    ``"search"`` for ``grep``/``find``, ``"list"`` for ``ls``)."""
    done = _DONE.get(verb, "done")
    try:
        real = os.path.realpath(path)
    except OSError as error:  # a link swapped while it was being read (EINVAL), a loop...
        raise ToolError(
            f"Cannot {verb} {shown}: its path changed while it was being resolved "
            f"({error.strerror or error}); nothing was {done}.",
            {"reason": "path_changed"},
        ) from None
    if checked is not None and real != checked:
        raise ToolError(
            f"Cannot {verb} {shown}: its path changed while the call ran (a symlink appeared on "
            f"the way); nothing was {done}. It was approved as {checked} and now leads to "
            f"{real}.",
            {"reason": "path_changed", "checked": checked, "now": real},
        )
    return Path(real)


async def real_root(
    args: dict[str, object], tools: ToolContext, verb: str = "search"
) -> tuple[str, Path]:
    """``(shown, root)`` of a search or listing (``grep``, ``find``, ``ls``): its ``path``
    argument as the model wrote it (``.`` when none) and the real folder or file it works in,
    resolved once as the approval checked it (:func:`real_target`, failing ``Cannot <verb>``
    when it leads elsewhere now). Raises :class:`ToolError` ``Path not found: <shown>`` when
    nothing is there."""
    shown = str(args.get("path") or ".")
    root = real_target(resolve_path(shown, tools.cwd), shown, tools.checked_target, verb=verb)
    if not await anyio.Path(root).exists():
        raise ToolError(f"Path not found: {shown}")
    return shown, root


def changed_error(shown: str, error: TargetChanged, verb: str = "write") -> ToolError:
    """The error of a call whose path changed between its resolution and the file's open."""
    return ToolError(
        f"Cannot {verb} {shown}: {error.strerror}; nothing was {_DONE.get(verb, 'done')}.",
        {"reason": "path_changed", "at": error.component},
    )


async def put_content(
    editor: EditorFiles | None,
    ledger: ReadLedger | None,
    path: Path,
    data: bytes,
    *,
    create_folders: bool = False,
) -> None:
    """``write``'s and ``edit``'s last step: ``data`` becomes ``path``'s content, in the
    editor's buffer when the session has an editor that takes it, else on disk; either way
    the agent knows it afterwards (it counts as read). ``path`` is a real path (see
    :func:`real_target`): the disk write lands exactly there or fails with
    :class:`~.exact.TargetChanged` (:func:`~.exact.write_exact`: no symlink is followed, the
    file is replaced atomically and synced). ``OSError`` from the disk propagates."""
    if editor is not None and await editor.write_text(path, data.decode("utf-8")):
        await record_text(ledger, path, data)
    else:
        await anyio.to_thread.run_sync(
            lambda: write_exact(os.fspath(path), data, create_folders=create_folders)
        )
        await record_written(ledger, path, data)


# -- an editor's buffers -------------------------------------------------------------------------
async def editor_read(editor: EditorFiles | None, path: Path) -> bytes | None:
    """The editor's text of ``path`` as UTF-8, or ``None`` (no editor, or it cannot read it:
    the disk is read instead)."""
    if editor is None:
        return None
    text = await editor.read_text(path)
    return None if text is None else text.encode("utf-8", errors="replace")


def buffer_fd(data: bytes) -> tuple[int, os.stat_result]:
    """An anonymous file holding ``data`` (a memory file where the system has them), and its
    ``fstat``: ``read`` scans an editor's text exactly as it scans a file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("coding-agent-buffer", os.MFD_CLOEXEC)
    else:  # pragma: no cover - not Linux
        with tempfile.TemporaryFile() as spare:
            fd = os.dup(spare.fileno())
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def _changed_in_editor(shown: str) -> ToolError:
    return ToolError(
        f"{shown} has changed in the editor since you last read it (the user, or something "
        "else, modified it). Read it again with the read tool, then retry with its current "
        "content.",
        {"reason": "changed_since_read"},
    )


async def check_fresh_text(ledger: ReadLedger | None, path: Path, shown: str, data: bytes) -> None:
    """Refuse a change of ``path`` whose current content is the editor's ``data`` unless
    ``ledger``'s stamp has its size and SHA-256 (no ledger: nothing is checked)."""
    if ledger is None:
        return
    stamp = await ledger.get(ledger_key(path))
    if stamp is None:
        raise _must_read(shown)
    if stamp.size != len(data) or stamp.sha256 != hashlib.sha256(data).hexdigest():
        raise _changed_in_editor(shown)


async def record_text(ledger: ReadLedger | None, path: Path, data: bytes) -> None:
    """After the editor took ``data`` as ``path``'s content: it counts as read (a stamp of
    ``data``: its size and hash; the disk's time, when the file is there)."""
    if ledger is None:
        return
    try:
        mtime_ns = (await anyio.Path(path).stat()).st_mtime_ns
    except OSError:
        mtime_ns = 0
    sha = hashlib.sha256(data).hexdigest() if len(data) <= HASH_LIMIT else None
    await ledger.put(ledger_key(path), FileStamp(len(data), mtime_ns, sha))
