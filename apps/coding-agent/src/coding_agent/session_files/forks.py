"""Sessions named by the caller and sessions forked from another: Claude Code's ``--session-id``
and ``--fork-session``.

A script that wants to find its session again picks the id itself, as it does with Claude
Code::

    id=$(uuidgen)
    coding-agent -p "start the migration" --session-id "$id"
    coding-agent -p --resume "$id" "go on"

:func:`uuid_session_id` checks the id: a UUID in its usual spelling (8-4-4-4-12 hex digits),
kept in lower case (``--resume`` finds the folder in either case); the new session is made with
that name (:func:`~coding_agent.session_files.folders.create_session`), and one that exists
already is refused, nothing made.

``--resume ID --fork-session`` (or ``--continue --fork-session``) runs in a new session that
starts as a copy of the resumed one (:func:`fork_session`), its branches, and the branch the
user is on, and leaves the original as it was: its entries, its files and its activity. The
copy is the session's own data, taken while holding the storage's lock, so no worker writes
it meanwhile: ``storage/`` (the entries), ``spill/`` (tool output too long for an entry),
``file-history/`` (what ``/rewind`` restores files from), ``state/`` (the facets' files) and
``activity`` (the branch the run continues in). Not copied: the worker's lock, socket and log,
background processes' output, the session's name and an import record (the fork is not the
import). A session a worker serves (a TUI, or a worker lingering after a run) is not copied:
its worker may be writing it; ``/fork`` in its TUI forks there, or fork it once it stopped.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
from collections.abc import Mapping

from coding_agent.session_files.folders import (
    Session,
    SessionError,
    create_session,
    remove_session,
)

__all__ = ["UUID_FORM", "fork_session", "uuid_session_id"]

UUID_FORM = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
"""A UUID as ``uuidgen`` (and Claude Code's ``--session-id``) writes it."""

_COPIED = ("storage", "spill", "file-history", "state", "activity")
"""What of a session folder its fork starts with (the module docstring says why)."""


def uuid_session_id(value: str) -> str:
    """``--session-id``'s ``value`` as a session id (lower case), or :class:`ValueError` with
    the one line that says what a valid one is."""
    if not UUID_FORM.fullmatch(value):
        raise ValueError(
            f"--session-id {value!r} is not a UUID (8-4-4-4-12 hex digits, as uuidgen prints one)"
        )
    return value.lower()


def fork_session(
    source: Session, *, session_id: str | None = None, env: Mapping[str, str] | None = None
) -> Session:
    """A new session (named ``session_id`` when given) that starts as a copy of ``source``
    (see the module docstring); ``source`` is only read. Raises :class:`SessionError` when a
    worker serves ``source``, or the id exists; a copy that fails leaves no new session."""
    busy = (
        f"session {source.id} is open in a running worker (a TUI, or one lingering after a "
        "run): fork it there with /fork, or once it stopped (/stop)"
    )
    if source.worker_running():
        raise SessionError(busy)
    fork = create_session(
        source.cwd, model=source.model, settings=source.settings, env=env, session_id=session_id
    )
    try:
        folder = os.open(source.storage_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:  # the lock a worker's storage holds while open: none starts while we copy
                fcntl.flock(folder, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise SessionError(busy) from None
                raise
            _copy(source, fork)
        finally:
            os.close(folder)  # the lock goes with it
    except BaseException:
        remove_session(fork)
        raise
    return fork


def _copy(source: Session, fork: Session) -> None:
    """Copy :data:`_COPIED` of ``source`` into ``fork`` (symbolic links as links, never what
    they point at; modes as they are: the session's files are private)."""
    for name in _COPIED:
        path = source.path / name
        target = fork.path / name
        if path.is_symlink() or not path.exists():
            continue
        if path.is_dir():
            shutil.copytree(path, target, symlinks=True, dirs_exist_ok=True)
        elif path.is_file():
            shutil.copy2(path, target)
