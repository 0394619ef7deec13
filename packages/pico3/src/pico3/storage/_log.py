"""The write side of ``main.jsonl``: one durable append per commit, as cheap as the device allows.

A commit is published by one line appended to ``main.jsonl`` (docs/design/storage.md#publication-point); with
``fsync=True`` it is acknowledged only once that line is on stable storage (docs/design/storage.md#publication-point). The obvious way,
``write`` on an ``O_APPEND`` descriptor then ``fsync``, makes every commit pay for a metadata
commit as well: the file grew, so the filesystem must persist the new size (and, each time a new
block is touched, the block allocation) before ``fsync`` returns. Databases avoid that in their
write-ahead logs, and :class:`MainLog` does the same.

Preallocate
    The file is grown ahead of the data by writing *real zeros* in chunks of at least
    :data:`MIN_CHUNK` (a quarter of the logical size, capped at :data:`MAX_CHUNK`, so the number of
    extensions grows only logarithmically with the log), then fsynced once, size and blocks
    included. Every later commit overwrites blocks that are already allocated and already written,
    which needs no metadata commit at all: a data-only sync suffices. ``fallocate`` would not do:
    it leaves *unwritten* extents, and the first write into one is a metadata change again.

Direct, synchronous block writes (``"direct"`` mode)
    A second descriptor opened with ``O_DIRECT | O_DSYNC`` turns each commit into one synchronous
    device write, straight from a page-aligned buffer: no page-cache copy, no writeback pass, no
    separate ``fdatasync`` call. ``O_DIRECT`` moves whole aligned blocks, so each append writes
    the 4 KiB-aligned range covering the new line: the tail block's earlier bytes (already
    committed), the line, and zero padding. Rewriting those earlier bytes is safe because they are
    rewritten with identical content: if the device tears the block write, every sector holds its
    old or its new content, and both hold the same committed bytes. 4 KiB alignment satisfies
    devices with 512-byte and 4 KiB logical blocks. InnoDB's redo log and PostgreSQL's WAL
    (which rewrites its last partial page on every commit) work the same way.

Fallback (``"prealloc"`` mode)
    Where ``O_DIRECT`` is refused (tmpfs, some filesystems, odd block sizes; probed once when the
    log is opened by rewriting the tail block with its own content) the line is written with
    ``pwrite`` at the logical end of the preallocated file and made durable with ``fdatasync``.

Without fsync (``"append"`` mode)
    A plain ``write`` on an ``O_APPEND`` descriptor: no preallocation, no sync. A commit survives
    the death of the process, not the loss of the machine.

What a crash leaves
    Complete committed lines followed by zeros (the preallocated region), possibly with part of the
    in-flight line before them. Open cuts "bytes after the last newline" (docs/design/storage.md#recovery),
    which removes both. :meth:`MainLog.close` truncates the file to its logical end, so a file at
    rest is clean JSONL.
"""

from __future__ import annotations

import errno
import mmap
import os
from typing import ClassVar, Literal

__all__ = ["BLOCK", "MAX_CHUNK", "MIN_CHUNK", "MainLog", "Mode"]

Mode = Literal["append", "direct", "prealloc"]

BLOCK = 4096
"""Alignment of direct writes and of preallocation (a multiple of every common logical block)."""
MIN_CHUNK = 256 * 1024
"""Smallest preallocation step."""
MAX_CHUNK = 8 * 1024 * 1024
"""Largest preallocation step; in between, a step is a quarter of the logical size."""

_O_DIRECT: int = getattr(os, "O_DIRECT", 0)
_O_DSYNC: int = getattr(os, "O_DSYNC", 0)
_ZERO_CHUNK = 1024 * 1024  # preallocation writes zeros in pieces of at most this size
_BUFFER = 64 * 1024  # initial direct buffer; grows to the largest line (rounded to blocks)


def _align_up(n: int) -> int:
    return -(-n // BLOCK) * BLOCK


def _datasync(fd: int) -> None:
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS, Windows
        os.fsync(fd)


def _pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


class MainLog:
    """Appends lines to ``main.jsonl``, durably when asked (see the module doc).

    The file must already end at a line boundary (open has cut any torn tail). ``durable=False``
    gives ``"append"`` mode; ``durable=True`` gives ``"direct"`` where ``O_DIRECT`` works and
    :attr:`use_direct` is true, ``"prealloc"`` otherwise. Not thread-safe: the caller serialises
    appends (JsonlStorage holds its writer lock). ``min_chunk`` is the smallest preallocation
    step (JsonlStorage's sidecars, which stay small, take a smaller one than :data:`MIN_CHUNK`).

    ``end`` (durable only) adopts a file its writer already preallocated: its lines end at
    ``end`` and everything after is written zeros, already durable (JsonlStorage's sticky
    rewrite writes the new file that way and fsyncs it once), so opening costs no
    preallocation and no sync. ``probe=False`` trusts that the filesystem takes direct writes
    (the file replaces one this storage wrote directly in the same folder) and skips the probe
    write.
    """

    use_direct: ClassVar[bool] = True
    """Try ``O_DIRECT`` for durable logs; tests and benchmarks set it false to force
    ``"prealloc"``."""

    def __init__(
        self,
        path: str,
        *,
        durable: bool,
        min_chunk: int = MIN_CHUNK,
        end: int | None = None,
        probe: bool = True,
    ) -> None:
        self._path = path
        self._min_chunk = min_chunk
        self._direct_fd = -1
        self._buffer: mmap.mmap | None = None
        self._closed = False
        self._mode: Mode
        if not durable:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            self._mode = "append"
        else:
            self._fd = os.open(path, os.O_RDWR)
            self._mode = "prealloc"
        try:
            size = os.fstat(self._fd).st_size
            if end is not None and (not durable or not 0 <= end <= size):
                raise ValueError(
                    f"{path}: cannot adopt a logical end of {end} (file size {size}, "
                    f"durable={durable}): only a durable log adopts a preallocated file"
                )
            self._end = size if end is None else end
            # an adopted file's zeros count up to its last whole block: direct writes stay
            # inside written blocks (the next append past them preallocates as usual)
            self._allocated = size if end is None else max(end, size - size % BLOCK)
            if durable:
                if end is None:
                    self._extend(self._end)
                if self.use_direct and _O_DIRECT and _O_DSYNC:
                    self._start_direct(probe)
        except BaseException:
            self._release()
            raise

    def __repr__(self) -> str:
        return f"<MainLog {self._path!r} mode={self._mode} end={self._end}>"

    @property
    def mode(self) -> Mode:
        """``"append"``, ``"direct"`` or ``"prealloc"`` (see the module doc)."""
        return self._mode

    @property
    def end(self) -> int:
        """The logical end: bytes of complete lines written so far (the file may be longer)."""
        return self._end

    @property
    def allocated(self) -> int:
        """The preallocated size of the file (equal to :attr:`end` in ``"append"`` mode)."""
        return self._end if self._mode == "append" else self._allocated

    # writing --------------------------------------------------------------------------------

    def append(self, line: bytes) -> None:
        """Write ``line`` (newline-terminated) at the logical end; durable on return unless in
        ``"append"`` mode. An :class:`OSError` propagates and leaves :attr:`end` unchanged."""
        if self._closed:
            raise ValueError(f"{self._path}: the log is closed")
        end = self._end + len(line)
        if self._mode == "append":
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
        else:
            if end > self._allocated:
                self._extend(end)
            if self._mode == "direct":
                self._write_direct(line)
            else:
                _pwrite_all(self._fd, line, self._end)
                _datasync(self._fd)
        self._end = end

    def _write_direct(self, line: bytes) -> None:
        buffer = self._buffer
        assert buffer is not None
        start = self._end - self._end % BLOCK  # file offset of the tail block = buffer[0]
        pos = self._end - start
        stop = pos + len(line)
        size = _align_up(stop)
        if size > len(buffer):
            buffer = self._grow_buffer(size)
        buffer[pos:stop] = line
        try:
            view = memoryview(buffer)
            try:
                written = 0
                while written < size:
                    count = os.pwrite(self._direct_fd, view[written:size], start + written)
                    if count <= 0 or count % BLOCK:  # cannot resume an unaligned direct write
                        raise OSError(f"{self._path}: short direct write ({count} of {size})")
                    written += count
            finally:
                view.release()
        except BaseException:
            buffer[pos:stop] = bytes(stop - pos)  # keep the buffer's zero padding
            raise
        # slide: the buffer now starts at the new tail block; everything after its end is zero
        head = stop - stop % BLOCK
        if head:
            tail = stop - head
            buffer.move(0, head, tail)
            buffer[tail:stop] = bytes(stop - tail)

    def _grow_buffer(self, size: int) -> mmap.mmap:
        old = self._buffer
        assert old is not None
        buffer = mmap.mmap(-1, max(size, 2 * len(old)))  # anonymous maps are page-aligned
        pos = self._end % BLOCK
        buffer[:pos] = old[:pos]
        old.close()
        self._buffer = buffer
        return buffer

    def _extend(self, needed: int) -> None:
        """Grow the file with written zeros to cover ``needed`` plus a step, then fsync it.

        On a full disk (or a file size limit) the step is dropped and only what ``needed``
        takes is written: the log then fails exactly when a plain append would, not a step
        earlier."""
        step = max(self._min_chunk, min(self._end // 4, MAX_CHUNK) // BLOCK * BLOCK)
        target = _align_up(max(needed, self._allocated + step))
        try:
            self._write_zeros(target)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EFBIG) or target <= needed:
                raise
            target = needed  # unaligned is fine: direct writes stay inside the written blocks
            self._write_zeros(target)
        os.fsync(self._fd)  # the size and the blocks are durable before any commit relies on them
        self._allocated = target

    def _write_zeros(self, target: int) -> None:
        offset = self._allocated
        zeros = bytes(min(_ZERO_CHUNK, target - offset)) if target > offset else b""
        while offset < target:
            offset += os.pwrite(self._fd, zeros[: target - offset], offset)

    def _start_direct(self, probe: bool) -> None:
        """Open the direct descriptor, load the tail block, probe (unless told the filesystem
        takes direct writes); on refusal stay in prealloc."""
        start = self._end - self._end % BLOCK
        tail = b""
        while len(tail) < self._end - start:
            chunk = os.pread(self._fd, self._end - start - len(tail), start + len(tail))
            if not chunk:
                raise OSError(f"{self._path}: file shrank while opening the log")
            tail += chunk
        try:
            fd = os.open(self._path, os.O_WRONLY | _O_DIRECT | _O_DSYNC)
        except OSError:
            return  # the filesystem refuses O_DIRECT
        buffer = mmap.mmap(-1, _BUFFER)
        buffer[: len(tail)] = tail
        if not probe:
            self._direct_fd = fd
            self._buffer = buffer
            self._mode = "direct"
            return
        try:
            view = memoryview(buffer)
            try:
                # the probe rewrites the tail block with its own content (zeros past the end are
                # preallocated zeros): harmless, and it proves alignment and support
                if os.pwrite(fd, view[:BLOCK], start) != BLOCK:
                    raise OSError(f"{self._path}: short direct probe write")
            finally:
                view.release()
        except OSError:
            os.close(fd)
            buffer.close()
            return
        self._direct_fd = fd
        self._buffer = buffer
        self._mode = "direct"

    # closing --------------------------------------------------------------------------------

    def close(self) -> None:
        """Cut the preallocated zeros (the file at rest is clean JSONL), sync, close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._mode != "append" and os.fstat(self._fd).st_size != self._end:
                os.ftruncate(self._fd, self._end)
                os.fsync(self._fd)
        finally:
            self._release()

    def abandon(self) -> None:
        """Close without cutting the preallocated zeros: for a file about to be unlinked (open
        cuts a zero tail anyway). Idempotent."""
        self._release()

    def _release(self) -> None:
        self._closed = True
        if self._direct_fd >= 0:
            os.close(self._direct_fd)
            self._direct_fd = -1
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
