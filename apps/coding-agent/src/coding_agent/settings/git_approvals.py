"""The repositories whose git configuration you allowed "while it stays as it is".

When a ``git`` the model runs without asking would run a program its repository configured
(a hook, ``core.fsmonitor``...), the approval dialog asks, and one of its answers is *Allow
always while this repository's git configuration stays as it is* (facets-approval's
``git_approvals`` module). This module keeps those answers, for every session and for ``-p``,
in ``$XDG_CONFIG_HOME/coding-agent/git-approvals.json`` beside the trust file::

    {"version": 1, "repositories": {"/home/me/repo/.git": {
        "fingerprint": "3f9a…", "programs": [".git/hooks/pre-commit (the pre-commit hook in .git/hooks)"],
        "at": "2026-12-07T11:40:00Z"}}}

keyed by the repository's git folder (absolute, real). The fingerprint covers exactly the
programs found then (settings, files, values, hook contents): any change asks again. Writes are
atomic under an advisory lock, as the trust file's; a file that cannot be parsed is an error
naming it, never silently reset. Delete an entry (or the file) to be asked again; ``/permissions``
lists them and removes one.

It is handed to the feature as the harness service ``git_approvals`` (:class:`GitApprovalStore`
has the duck-typed interface the feature names; neither imports the other).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec

from coding_agent.settings.trust import (
    TRUST_FILE_VERSION,
    read_store_file,
    trust_path,
    updating_store_file,
)
from pico3 import write_atomic

__all__ = ["GIT_APPROVALS_FILE", "SERVICE", "GitApproval", "GitApprovalStore"]

SERVICE = "git_approvals"
"""The harness service's name (``facets_approval.git_approvals.GIT_APPROVALS_SERVICE``)."""

GIT_APPROVALS_FILE = "git-approvals.json"
"""The file's name, beside ``trust.json``."""


class GitApproval(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One repository's configuration as approved: its fingerprint, what it runs, when."""

    fingerprint: str
    programs: list[str]
    at: Annotated[datetime, msgspec.Meta(tz=True)]


class _File(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    repositories: dict[str, GitApproval]


class GitApprovalStore:
    """The approvals in one JSON file (see the module docs). Every call reads the file afresh
    (another agent may have approved meanwhile). Errors are ``ValueError`` naming the file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def default(cls, env: Mapping[str, str] | None = None) -> GitApprovalStore:
        """The store beside the trust file (``env`` defaults to ``os.environ``)."""
        return cls(trust_path(env).with_name(GIT_APPROVALS_FILE))

    def load(self) -> dict[str, GitApproval]:
        """Every approval by git folder; a missing file is empty, a bad one raises."""
        what, forgets = "git approvals file", "every approval of a repository's git configuration"
        data = read_store_file(self.path, _File, what, forgets, ValueError)
        for folder in () if data is None else data.repositories:
            if not os.path.isabs(folder):
                raise ValueError(f"{self.path}: git folder {folder!r} is not an absolute path")
        return {} if data is None else data.repositories

    def fingerprint(self, git_dir: str) -> str | None:
        """The fingerprint approved for ``git_dir`` (``None``: none)."""
        found = self.load().get(git_dir)
        return None if found is None else found.fingerprint

    def approve(self, git_dir: str, fingerprint: str, programs: Sequence[str]) -> None:
        """Record ``git_dir``'s configuration as approved (replacing its earlier approval)."""
        if not os.path.isabs(git_dir):
            raise ValueError(f"the git folder {git_dir!r} is not an absolute path")
        when = datetime.now(UTC).replace(microsecond=0)
        with self._updating():
            repositories = dict(self.load())
            repositories[git_dir] = GitApproval(fingerprint, list(programs), when)
            self._write(repositories)

    def listed(self) -> list[dict[str, Any]]:
        """Every approval as ``{"gitDir", "fingerprint", "programs", "at"}``, by folder."""
        return [
            {
                "gitDir": folder,
                "fingerprint": found.fingerprint,
                "programs": list(found.programs),
                "at": found.at.isoformat(),
            }
            for folder, found in sorted(self.load().items())
        ]

    def forget(self, git_dir: str) -> None:
        """Remove ``git_dir``'s approval; ``ValueError`` when there is none."""
        with self._updating():
            repositories = dict(self.load())
            if repositories.pop(git_dir, None) is None:
                raise ValueError(f"{self.path}: no approval of {git_dir}'s git configuration")
            self._write(repositories)

    def _updating(self) -> AbstractContextManager[None]:
        """Hold the file's lock around a read-update-replace (its folder made private)."""
        return updating_store_file(self.path, self.path, "git approvals", ValueError)

    def _write(self, repositories: dict[str, GitApproval]) -> None:
        record = _File(TRUST_FILE_VERSION, dict(sorted(repositories.items())))
        write_atomic(self.path, msgspec.json.format(msgspec.json.encode(record)) + b"\n")
