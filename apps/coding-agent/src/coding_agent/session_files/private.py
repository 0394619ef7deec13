"""Private by construction: the agent's folders are ``0700`` and its files ``0600``, whatever the
umask (issue 24 deliver 2).

A session holds everything the user typed and everything the agent read, and its socket accepts
prompts that run commands. None of it may depend on the umask of whoever started the agent:

* :func:`private_dir` makes (or tightens) one folder of the agent's own to ``0700``;
* :func:`private_tree` makes every missing folder from a base down to a folder ``0700``;
* :data:`PRIVATE_FILE` is the mode files are created with (``os.open(..., PRIVATE_FILE)``:
  the umask can only take bits away, so ``0600`` stays ``0600``);
* :func:`socket_folder` checks the folder a socket goes in when the session folder's own path
  is too long for a socket (``$TMPDIR/coding-agent-<uid>/``): it must be a real folder (not a
  symbolic link) owned by the user with mode ``0700``, checked with ``lstat``. Anything else,
  say a folder another user created first to take the socket's place, is refused with an
  error naming it and the fix.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "PrivacyError",
    "private_dir",
    "private_tree",
    "socket_folder",
]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


class PrivacyError(PermissionError):
    """A folder the agent must keep private is not (another owner, a link, open modes)."""

    def __str__(self) -> str:
        return str(self.strerror)


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` with mode ``0700`` (its parent must exist), or tighten an existing folder
    of the user's to ``0700``; returns it. A folder of another user raises
    :class:`PrivacyError`."""
    folder = Path(path)
    try:
        folder.mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        pass
    info = os.stat(folder)
    if info.st_uid != os.geteuid():
        raise PrivacyError(
            errno.EPERM, f"{folder} is owned by {_owner(info.st_uid)}, not by you: not private"
        )
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR:
        os.chmod(folder, PRIVATE_DIR)  # mkdir honours the umask; an old folder may be 0755
    return folder


def private_tree(base: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """Make ``path`` and every folder between ``base`` (exclusive, created with the umask if
    missing) and it private (:func:`private_dir`); ``path`` must be inside ``base``."""
    base, target = Path(base), Path(path)
    relative = target.relative_to(base)
    base.mkdir(parents=True, exist_ok=True)
    folder = base
    for part in relative.parts:
        folder = private_dir(folder / part)
    return target


def socket_folder(path: str | os.PathLike[str]) -> Path:
    """The folder of a socket outside the session folder, created ``0700`` or checked: a real
    folder owned by the user, mode ``0700`` (``lstat``: a symbolic link is refused). Raises
    :class:`PrivacyError` naming the folder, what is wrong and the fix otherwise."""
    folder = Path(path)
    try:
        folder.mkdir(mode=PRIVATE_DIR)
        os.chmod(folder, PRIVATE_DIR)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != os.geteuid():
        problem = f"is owned by {_owner(info.st_uid)}, not by you ({_owner(os.geteuid())})"
    elif mode != PRIVATE_DIR:
        problem = f"has mode {mode:04o}, not 0700"
    else:
        return folder
    raise PrivacyError(
        errno.EPERM,
        f"{folder} {problem}: refusing to put the session's socket there (another user could "
        "take its place). Remove it, or set TMPDIR to a folder only you can write",
    )
