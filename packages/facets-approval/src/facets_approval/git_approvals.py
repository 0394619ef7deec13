"""Approvals of a repository's git configuration "while it stays as it is".

A ``git`` that would run unasked asks when its repository's configuration names a program
(:mod:`.gitconfig`). In a project the user does not trust, that question comes at every
``git commit`` of a repository with hooks. The dialog's third choice,
*Allow always while this repository's git configuration stays as it is*, remembers the
approval keyed on the repository's git folder (absolute, real) and a
:func:`~.gitconfig.fingerprint` of exactly the programs found (each setting, its file, its value,
and the content hash of a hook or of a file a value names). While the fingerprint matches, that
repository's git commands that would otherwise run unasked run; a new hook, an edited hook file
or a changed value asks again. Nothing else is widened: a command no rule or mode lets run
asks as before, and another repository with the same hooks is another key.

The store is the app's, a user-level file beside its trust file, handed to the feature as the
harness service :data:`GIT_APPROVALS_SERVICE` (duck-typed :class:`GitApprovals`; the feature
never imports the app). Without it, the dialog offers no such choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from chord import RemoteServiceError

__all__ = [
    "GIT_APPROVALS_SERVICE",
    "GitApprovals",
    "Lookup",
    "RememberedGit",
    "forget",
    "git_approvals",
    "listing",
    "remember",
]

GIT_APPROVALS_SERVICE = "git_approvals"
"""The harness service (``HarnessOptions.services``) holding the app's :class:`GitApprovals`."""


class GitApprovals(Protocol):
    """What the app provides as :data:`GIT_APPROVALS_SERVICE`.

    ``fingerprint(git_dir)`` is the fingerprint approved for that git folder (``None``: none);
    ``approve(git_dir, fingerprint, programs)`` records one (replacing the folder's earlier
    one), ``programs`` the lines that name what it runs, for a person reading the list;
    ``listed()`` every approval as ``{"gitDir", "fingerprint", "programs", "at"}``;
    ``forget(git_dir)`` removes one. Each raises ``ValueError`` with a message naming the file
    when the store cannot be read or written (a corrupt file is never silently reset)."""

    def fingerprint(self, git_dir: str) -> str | None: ...

    def approve(self, git_dir: str, fingerprint: str, programs: Sequence[str]) -> None: ...

    def listed(self) -> list[dict[str, Any]]: ...

    def forget(self, git_dir: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RememberedGit:
    """One repository whose configuration a dialog may approve as it is now."""

    git_dir: str
    fingerprint: str
    programs: tuple[str, ...]
    """What it runs, as the reason names each (``./run.sh (core.fsmonitor in .git/config)``)."""

    def to_json(self) -> dict[str, Any]:
        """The request's (and the decision's) form: ``{"gitDir", "fingerprint", "programs"}``."""
        return {
            "gitDir": self.git_dir,
            "fingerprint": self.fingerprint,
            "programs": [*self.programs],
        }

    @classmethod
    def from_json(cls, value: object) -> RememberedGit | None:
        """The inverse of :meth:`to_json` (``None`` for anything not in that shape)."""
        if not isinstance(value, Mapping):
            return None
        git_dir, print_, programs = (value.get(k) for k in ("gitDir", "fingerprint", "programs"))  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if not isinstance(git_dir, str) or not isinstance(print_, str):
            return None
        shown = [p for p in programs if isinstance(p, str)] if isinstance(programs, list) else []  # pyright: ignore[reportUnknownVariableType]
        return cls(git_dir, print_, tuple(shown))  # pyright: ignore[reportUnknownArgumentType]


def git_approvals(services: Mapping[str, Any]) -> GitApprovals | None:
    """The app's store among the harness ``services`` (``None``: no such store here)."""
    found = services.get(GIT_APPROVALS_SERVICE)
    needed = ("fingerprint", "approve")
    return found if found is not None and all(hasattr(found, n) for n in needed) else None


class Lookup:
    """The ``remembered`` of :func:`~.gitconfig.git_check` over a store: an approval that cannot
    be read counts as none (the command asks), and :attr:`problems` says why."""

    def __init__(self, approvals: GitApprovals | None) -> None:
        self.approvals = approvals
        self.problems: list[str] = []

    def __call__(self, git_dir: str) -> str | None:
        if self.approvals is None:
            return None
        try:
            return self.approvals.fingerprint(git_dir)
        except Exception as error:  # a store must never stop a decision: it asks, and says so
            self.problems.append(str(error))
            return None

    def offered(self, repositories: Sequence[RememberedGit]) -> list[dict[str, Any]]:
        """The request's ``repositories``: empty without a readable store (nothing to keep)."""
        if self.approvals is None or self.problems:
            return []
        return [r.to_json() for r in repositories]

    def reason(self, configured: str) -> str:
        """The dialog's reason for a call whose repository configured a program."""
        said = f"This asks because {configured}."
        if self.problems:
            return f"{said} The remembered approvals could not be read: {self.problems[0]}"
        return f"{said} Trusting the project (/trust) lets its git configuration run unasked."


def remember(approvals: GitApprovals | None, repositories: object) -> list[str]:
    """Keep each of a decision's ``repositories`` in ``approvals``; the problems (one line
    each: the store cannot be written, none is available)."""
    if approvals is None:
        return ["no store of git configuration approvals is available here"]
    problems: list[str] = []
    for value in repositories if isinstance(repositories, list) else []:  # pyright: ignore[reportUnknownVariableType]
        found = RememberedGit.from_json(value)
        if found is None:
            continue
        try:
            approvals.approve(found.git_dir, found.fingerprint, found.programs)
        except Exception as error:  # the call is allowed; the approval is not kept
            problems.append(
                f"the approval of {found.git_dir}'s git configuration was not kept: {error}"
            )
    return problems


def listing(approvals: GitApprovals | None) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """What ``/permissions`` shows: every approval (``None`` without a store) and the problem
    reading them (a corrupt file, named)."""
    if approvals is None or not hasattr(approvals, "listed"):
        return None, []
    try:
        found = approvals.listed()
    except Exception as error:  # shown as a problem; nothing is reset
        return [], [str(error)]
    keys = ("gitDir", "programs", "at")
    return [{k: entry[k] for k in keys if k in entry} for entry in found], []


def forget(approvals: GitApprovals | None, git_dir: object) -> None:
    """Remove ``git_dir``'s approval; ``RemoteServiceError`` (``service_invalid_value``) with
    the store's message when it cannot."""
    if not isinstance(git_dir, str) or not git_dir:
        raise RemoteServiceError("service_invalid_value", f"Invalid git folder {git_dir!r}")
    if approvals is None or not hasattr(approvals, "forget"):
        raise RemoteServiceError("service_invalid_value", "No git approvals are kept here")
    try:
        approvals.forget(git_dir)
    except Exception as error:
        raise RemoteServiceError("service_invalid_value", f"Not removed: {error}") from None
