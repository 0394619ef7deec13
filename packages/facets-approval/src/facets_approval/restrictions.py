"""Claude Code's restrictive permission switches, as the approval feature applies them.

Organisations put these in Claude Code's settings and rely on them, so this feature honours
them rather than only noting them. The app reads them from every Claude Code settings file
(``~/.claude/settings.json``, the project's ``.claude/settings.json`` and
``.claude/settings.local.json``) and hands them over in its permission source's ``load()``
(:class:`~.permissions.PermissionSource`) as ``"restrictions"``: ``{key: the file that turned
it on}``, a key present only when some file turned it on. Each can only restrict, so any file
turns it on and none turns it off (a project cannot lift what your own file set)::

    {"restrictions": {"denyInsteadOfPrompting": "/home/me/.claude/settings.json"}}

* ``disableBypassPermissionsMode: "disable"`` (:data:`NO_AUTO`) — the ``auto`` mode, this
  agent's ``bypassPermissions``, cannot be entered: ``set_mode("auto")`` is refused with
  :func:`auto_refusal`, the mode service's state lists it under ``disabled`` (a presentation
  skips it when cycling, an editor is not offered it), and a session stored in ``auto`` before
  the switch was set is decided, stored and shown in ``ask`` (:func:`effective_mode`).
* ``denyInsteadOfPrompting: true`` (:data:`DENY_ASKS`) — a call that would ask is refused
  instead, without a dialog, and the turn goes on: the model reads :func:`deny_instead_reason`
  (why it would have asked, and that nobody is asked). Subagents' calls too. What runs without
  asking (an allow rule, the mode) still runs.
* ``blockWritesOutsideWorkingDirectories: true`` (:data:`BLOCK_OUTSIDE_WRITES`) — ``write`` and
  ``edit`` (the file tools, not ``bash``) of a path outside the working directories are refused
  in every mode, ``auto`` included; the model reads :func:`outside_write_reason`, which tells it
  to ask the user to add the folder. The working directories are :func:`working_directories`.
* ``blockReadsOutsideWorkingDirectories: true`` (:data:`BLOCK_OUTSIDE_READS`) — ``read``,
  ``grep``, ``find`` and ``ls`` outside the working directories are refused in every mode
  (:mod:`.workdirs`, which the host's own ``config.toml`` switch feeds too).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .contract import PermissionMode
from .guarded import path_within
from .workdirs import working_directories as _working_directories

__all__ = [
    "BLOCK_OUTSIDE_READS",
    "BLOCK_OUTSIDE_WRITES",
    "DENY_ASKS",
    "NO_AUTO",
    "RESTRICTION_KEYS",
    "Restrictions",
    "auto_refusal",
    "deny_instead_reason",
    "effective_mode",
    "outside_write_reason",
    "working_directories",
]

NO_AUTO = "disableBypassPermissionsMode"
DENY_ASKS = "denyInsteadOfPrompting"
BLOCK_OUTSIDE_WRITES = "blockWritesOutsideWorkingDirectories"
BLOCK_OUTSIDE_READS = "blockReadsOutsideWorkingDirectories"
RESTRICTION_KEYS = (NO_AUTO, DENY_ASKS, BLOCK_OUTSIDE_WRITES, BLOCK_OUTSIDE_READS)
"""The ``permissions.*`` keys of Claude Code's settings honoured here (the source's names)."""


@dataclass(frozen=True, slots=True)
class Restrictions:
    """The switches in force: each the file that turned it on, or ``None`` (off)."""

    no_auto: str | None = None
    deny_asks: str | None = None
    block_outside_writes: str | None = None
    block_outside_reads: str | None = None

    @classmethod
    def of(cls, loaded: Mapping[str, Any]) -> Restrictions:
        """The switches of a permission source's ``load()`` answer (anything malformed is off:
        the app checks the files and reports a wrong value)."""
        found = loaded.get("restrictions")
        given: Mapping[str, Any] = found if isinstance(found, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]

        def source(key: str) -> str | None:
            value = given.get(key)
            return value if isinstance(value, str) and value else None

        return cls(
            source(NO_AUTO),
            source(DENY_ASKS),
            source(BLOCK_OUTSIDE_WRITES),
            source(BLOCK_OUTSIDE_READS),
        )

    def disabled(self) -> dict[str, str]:
        """The modes that cannot be entered, each with why (the mode service's ``disabled``)."""
        return {"auto": auto_refusal(self.no_auto)} if self.no_auto else {}


def auto_refusal(source: str) -> str:
    """Why ``auto`` cannot be entered: the file that disables it, and what to do."""
    return (
        f"the auto permission mode is disabled by permissions.disableBypassPermissionsMode in "
        f"{source}; use ask, accept-edits, sandbox or plan"
    )


def effective_mode(mode: PermissionMode, restrictions: Restrictions) -> PermissionMode:
    """``mode`` as decisions apply it: ``ask`` for an ``auto`` the switches disable."""
    return "ask" if mode == "auto" and restrictions.no_auto else mode


def deny_instead_reason(tool: str, why: str, source: str) -> str:
    """The block reason the model reads for a call that would have asked (``why``: the
    sentence saying why it asks)."""
    return (
        f"{tool} was not run: it needs approval, and permissions.denyInsteadOfPrompting in "
        f"{source} refuses such calls instead of asking anyone. {why} Do not retry it; carry "
        "on without it, or tell the user what you need and why so they can allow it."
    )


def working_directories(
    workspace: str | None, services: Mapping[str, Any] | None = None
) -> list[str]:
    """The folders ``write`` and ``edit`` may reach under ``blockWritesOutsideWorkingDirectories``
    (real paths): the project folder, the harness service ``workspace``, and the added ones
    (:func:`.workdirs.working_directories`, the one definition, over the host's ``services``)."""
    if workspace is None:
        return []
    found = _working_directories(workspace, services or {})
    if found is not None:
        return list(found.folders)
    return [os.path.realpath(os.path.expanduser(workspace))]


def outside_write_reason(
    tool: str,
    real: str | None,
    workspace: str | None,
    source: str,
    services: Mapping[str, Any] | None = None,
) -> str | None:
    """The block reason for a ``write``/``edit`` of ``real`` (the target resolved once,
    symlinks followed: :func:`~.session.edit_target`) outside every working directory, or
    ``None`` when it is inside one. A target that cannot be resolved is refused too."""
    folders = working_directories(workspace, services)
    if real is not None and any(path_within(real, folder) for folder in folders):
        return None
    where = f" ({real})" if real is not None else ""
    inside = " or ".join(folders) or "the project folder"
    return (
        f"{tool} was not run: its target{where} is outside the working directories ({inside}), "
        f"and permissions.blockWritesOutsideWorkingDirectories in {source} refuses file edits "
        "there in every mode. Ask the user to add that folder as a working directory (or to "
        "make the change themselves); do not write it another way."
    )
