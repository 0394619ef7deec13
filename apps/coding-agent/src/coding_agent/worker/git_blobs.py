"""The contents git already keeps, so file history need not copy them (issue 38, item 9).

A checkout's tracked files are in its object database: the index names each file's blob
(``git ls-files -s``), and ``git show <blob>`` prints that content back. File history
(:mod:`.file_history`) uses that around ``bash``: a file whose content is exactly its index blob
(the snapshot hashes the file the way git does, :func:`git_oid`, and compares) needs no copy
before the command; only when the command changed it is its earlier content read back from git
(:func:`read_git_blobs`) and stored, so the disk a snapshot costs is the files git does not
already hold.

Git runs only through :func:`pico3.run_git` (read-only built-ins, with every program a
repository configures switched off: no fsmonitor, hook or filter driver runs, trusted project or
not). No git, no repository, a SHA-256 repository or any failure: no index (every file is then
copied as if git were absent).
"""

from __future__ import annotations

import hashlib
import os
import subprocess

from pico3 import run_git

__all__ = ["git_index", "git_oid", "read_git_blobs"]

_GIT_TIMEOUT = 60.0
"""Seconds one git command may take before the index is treated as absent."""

_BLOB_MODES = frozenset({b"100644", b"100755"})
"""Index entries that are regular files (not symlinks, not submodules)."""

_SHOW_BATCH = 256
"""Blobs read back per ``git show``."""


def git_oid(data: bytes) -> str:
    """The id git gives ``data`` as a blob (SHA-1 of ``blob <size>\\0`` and the bytes)."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def git_index(root: str | os.PathLike[str]) -> dict[str, str]:
    """The blob id of every regular file git's index holds under ``root`` (paths relative to
    ``root``, ``/``-separated; merged entries only), or ``{}`` when ``root`` is not in a SHA-1
    repository or git cannot tell."""
    try:
        done = run_git(root, "ls-files", "-s", "-z", timeout=_GIT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    out: dict[str, str] = {}
    for record in done.stdout.split(b"\0"):
        head, tab, name = record.partition(b"\t")
        fields = head.split(b" ")
        if not tab or len(fields) != 3:
            continue
        mode, oid, stage = fields
        if mode in _BLOB_MODES and stage == b"0" and len(oid) == 40:
            out[os.fsdecode(name)] = oid.decode("ascii")
    return out


def read_git_blobs(root: str | os.PathLike[str], wanted: dict[str, int]) -> dict[str, bytes]:
    """The contents of the blobs ``wanted`` (id -> size) that the repository of ``root`` still
    holds, each checked against its id; a blob git no longer has is left out."""
    found: dict[str, bytes] = {}
    ids = sorted(wanted)
    for start in range(0, len(ids), _SHOW_BATCH):
        batch = ids[start : start + _SHOW_BATCH]
        found.update(_show(root, batch, wanted))
    return found


def _show(root: str | os.PathLike[str], ids: list[str], sizes: dict[str, int]) -> dict[str, bytes]:
    """``git show`` prints blobs back to back: cut its output by the known sizes. When one is
    missing the whole command fails, so then each is asked for alone."""
    try:
        done = run_git(root, "show", *ids, timeout=_GIT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        if len(ids) == 1:
            return {}
        out: dict[str, bytes] = {}
        for oid in ids:
            out.update(_show(root, [oid], sizes))
        return out
    out = {}
    at = 0
    for oid in ids:
        data = done.stdout[at : at + sizes[oid]]
        at += sizes[oid]
        if git_oid(data) == oid:
            out[oid] = data
    if len(ids) > 1:  # a size that did not match shifts the rest: ask for those alone
        for oid in ids:
            if oid not in out:
                out.update(_show(root, [oid], sizes))
    return out
