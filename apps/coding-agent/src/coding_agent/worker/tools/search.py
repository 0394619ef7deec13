"""What grep and find share: choosing ripgrep or Python, running ``rg``, glob filters.

ripgrep is fast and knows every ignore-file subtlety, so it is used when an ``rg`` executable is
found (on ``PATH`` or next to the running Python, where the ``ripgrep`` wheel installs it). The
pure-Python search (:mod:`.ignore` + ``re``) is the fallback and gives the same answers for the
common cases; :attr:`ToolContext.search_backend` forces either one.

ripgrep always runs with ``--hidden --no-require-git --no-ignore-dot --no-config`` so that both
backends read the same rules: dotfiles are searched, ``.gitignore`` files count even outside a
git repository, ``.ignore``/``.rgignore`` files and the user's ripgrep config do not, and
``.git`` folders are skipped. The ``glob`` arguments are applied here (:func:`glob_filter`)
rather than with ``rg --glob``, whose include globs would override ``.gitignore``.

``rg`` starts in its folder exactly: the folder (a real path) is opened by the no-follow walk of
:mod:`.exact`, and on Linux the child changes into that descriptor (``/proc/self/fd/N``), so a
folder on the way swapped for a symlink after the path was checked fails the call
(:class:`~.exact.TargetChanged`) instead of being searched. What ``rg`` opens below it is opened
by name (it follows no symlink inside the tree, but a folder swapped while it searches is not
detected); the Python search walks by path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import lru_cache
from pathlib import Path

import anyio
import anyio.abc

from .exact import open_folder
from .spec import ToolContext, ToolError

__all__ = ["RG_COMMON_FLAGS", "glob_filter", "open_rg", "ripgrep_path", "use_ripgrep"]

RG_COMMON_FLAGS = (
    "--hidden",
    "--no-require-git",
    "--no-ignore-dot",
    "--no-config",
    "--sort",
    "path",
    "--glob",
    "!.git",
)


@lru_cache(maxsize=1)
def ripgrep_path() -> str | None:
    """The ``rg`` executable to use, or ``None`` when there is none."""
    found = shutil.which("rg")
    if found:
        return found
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, "rg")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def use_ripgrep(tools: ToolContext) -> str | None:
    """The ``rg`` path when this call should use ripgrep, ``None`` for the Python search."""
    if tools.search_backend == "python":
        return None
    found = ripgrep_path()
    if found is None and tools.search_backend == "ripgrep":
        raise ToolError("ripgrep (rg) was requested but is not installed")
    return found


def glob_filter(pattern: str | None) -> Callable[[str], bool]:
    """A predicate on ``/``-separated relative paths with ripgrep's ``--glob`` meaning.

    A glob without ``/`` matches a name at any depth; one with ``/`` is anchored at the search
    root (gitignore pattern rules, which ripgrep's globs follow).
    """
    if not pattern:
        return lambda _path: True
    import pathspec  # ~15 ms: a search with a glob pays for it, not every start

    spec = pathspec.GitIgnoreSpec.from_lines([pattern])
    return spec.match_file


_FD_FOLDER = "/proc/self/fd"
"""Where a child process can change into one of its descriptors by name (Linux)."""


@lru_cache(maxsize=1)
def _by_descriptor() -> bool:
    return os.path.isdir(_FD_FOLDER)


@asynccontextmanager
async def open_rg(rg: str, args: list[str], cwd: Path) -> AsyncIterator[anyio.abc.Process]:
    """Start ``rg`` with ``args`` in ``cwd`` (a real path: entered without following a symlink
    where the system allows, see the module; raises :class:`~.exact.TargetChanged` when one
    appeared on the way); kill it on the way out if it is still running."""
    walked = await anyio.to_thread.run_sync(open_folder, os.fspath(cwd))
    try:
        inside = f"{_FD_FOLDER}/{walked}" if _by_descriptor() else os.fspath(cwd)
        process = await anyio.open_process(
            [rg, *args],
            cwd=inside,  # the child changes folder before it closes the descriptor (exec)
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    finally:
        os.close(walked)
    try:
        yield process
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.aclose()


async def read_lines(stream: anyio.abc.ByteReceiveStream) -> AsyncIterator[bytes]:
    """Split a byte stream into lines (without the trailing newline)."""
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line
    if buffer:
        yield buffer


async def collect(
    stream: anyio.abc.ByteReceiveStream | None, into: bytearray, cap: int = 65536
) -> None:
    """Drain ``stream`` into ``into``, keeping at most ``cap`` bytes."""
    if stream is None:
        return
    async for chunk in stream:
        if len(into) < cap:
            into.extend(chunk[: cap - len(into)])
