"""The working directories: the folders a file tool reads without asking.

As in Claude Code, the *working directories* are the project folder (the session's folder, the
harness service ``workspace``) plus the folders the user added (``--add-dir`` and ``/add-dir``,
stored with the session; ``/add-dir --remember`` and ``permissions.additionalDirectories``, in
the user's settings). A ``read``, ``grep``, ``find`` or ``ls`` of a path
outside them asks in every mode but ``auto`` (the OS sandbox does not confine the file tools, so
``sandbox`` mode asks too); a ``Read(...)`` allow rule covering the path lets it run, and a deny
rule still wins. Reads of the agent's *own* files never ask: the host lists them (its spill
files and temporary folders, the skills, context files, prompt templates and subagent
definitions it loads, its configuration), since the agent itself tells the model to read them.
A subagent's memory folder is its own too, for that subagent alone (:mod:`.memory`: named in its
task's input, not here).
With ``blockReadsOutsideWorkingDirectories`` the host asks for more: a read outside is refused
in every mode, ``auto`` included, and the model is told to ask the user to add the folder.

The host hands the lists over as the harness service :data:`WORKING_DIRECTORIES_SERVICE`, a plain
mapping (the app and this feature never import each other)::

    {"added": ["/abs/folder", ...],        # the added working directories
     "agent": ["/abs/file-or-folder", "/tmp/coding-agent-*", ...],   # the agent's own files
     "blockReadsOutside": False}

An ``agent`` entry covers that file or folder and everything in it; a trailing ``*`` in its last
name covers every name starting so (the agent's temporary files). The mapping may change while
the session runs (``/add-dir``): it is read at each decision. A host that provides no such
service has no working-directory check (every read runs as before).

:func:`working_directories` is the one definition of "the working directories" (real paths, the
project first); :func:`read_outside` says whether a call reads outside them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .guarded import path_within
from .searched import read_target

__all__ = [
    "WORKING_DIRECTORIES_SERVICE",
    "OutsideRead",
    "WorkingDirectories",
    "read_outside",
    "working_directories",
]

WORKING_DIRECTORIES_SERVICE = "working_directories"
"""The harness service naming the added working directories and the agent's own files (module
doc); the app provides it."""


@dataclass(frozen=True, slots=True)
class WorkingDirectories:
    """The session's working directories (real paths, the project first), the agent's own files
    read without asking, and whether a read outside is refused rather than asked about."""

    folders: tuple[str, ...]
    agent: tuple[str, ...] = ()
    block_outside: bool = False

    def holds(self, path: str) -> bool:
        """Whether the real path ``path`` is in a working directory or is one of the agent's
        own files."""
        if any(path_within(path, folder) for folder in self.folders):
            return True
        for entry in self.agent:
            if entry.endswith("*"):  # a name prefix in one folder: /tmp/coding-agent-*
                parent, prefix = os.path.split(entry[:-1])
                relative = os.path.relpath(path, parent) if path_within(path, parent) else ""
                if relative and not relative.startswith("..") and relative.startswith(prefix):
                    return True
            elif path_within(path, entry):
                return True
        return False


def _strings(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        return []
    return [item for item in cast(Sequence[object], value) if isinstance(item, str) and item]


def _real(path: str) -> str:
    """``path`` with ``~`` expanded and symlinks followed (a ``*`` name prefix kept)."""
    expanded = os.path.expanduser(path)
    if expanded.endswith("*"):
        parent, prefix = os.path.split(expanded)
        return os.path.join(os.path.realpath(parent), prefix)
    return os.path.realpath(expanded)


def working_directories(
    workspace: str | None, services: Mapping[str, Any]
) -> WorkingDirectories | None:
    """The working directories of the session whose folder is ``workspace``, from the harness
    ``services`` (:data:`WORKING_DIRECTORIES_SERVICE`, module doc); ``None`` when no workspace
    is known or the host provides no such service (nothing is checked then)."""
    found = services.get(WORKING_DIRECTORIES_SERVICE)
    if workspace is None or not isinstance(found, Mapping):
        return None
    given = cast(Mapping[str, object], found)
    folders = [_real(workspace)]
    for folder in _strings(given.get("added")):
        real = _real(folder)
        if real not in folders:
            folders.append(real)
    agent = tuple(_real(entry) for entry in _strings(given.get("agent")))
    return WorkingDirectories(tuple(folders), agent, given.get("blockReadsOutside") is True)


@dataclass(frozen=True, slots=True)
class OutsideRead:
    """A read outside the working directories: what it reads, the folder to add, and the
    sentences a dialog (:attr:`why`) and a refusal (:attr:`refusal`) show."""

    tool: str
    target: str
    folder: str
    folders: tuple[str, ...]
    blocked: bool = False
    """``blockReadsOutsideWorkingDirectories``: refused in every mode, not asked about."""

    @property
    def why(self) -> str:
        """The dialog's line (after "This asks because"): names the folder."""
        return (
            f"{self.tool} reads {self.target}, outside the working directories "
            f"({', '.join(self.folders)}); to read in {self.folder} without asking, start the "
            f"agent with --add-dir {self.folder} (or /add-dir {self.folder} in the TUI, kept "
            "with the session; /add-dir --remember for every session)"
        )

    @property
    def rule(self) -> str:
        """The allow rule a dialog offers to keep: ``Read(//folder)``, the folder and everything
        in it (glob characters in its name escaped)."""
        return "Read(/" + re.sub(r"([*?\[\]\\])", r"\\\1", self.folder) + ")"

    @property
    def refusal(self) -> str:
        """The block reason the model reads when reads outside are refused."""
        return (
            f"{self.tool} was not run: {self.target} is outside the working directories "
            f"({', '.join(self.folders)}), and permissions.blockReadsOutsideWorkingDirectories "
            f"refuses reads there in every mode. Do not try another way to read it: ask the "
            f"user to add the folder (start the agent with --add-dir {self.folder}, or /add-dir "
            f"{self.folder} in the TUI)."
        )


def read_outside(
    tool: str,
    arguments: object,
    dirs: WorkingDirectories | None,
    home: str,
    *,
    real: str | None = None,
) -> OutsideRead | None:
    """The :class:`OutsideRead` when a call of ``tool`` (``read``, ``grep``, ``find``, ``ls``:
    :data:`~.searched.PATH_TOOLS`) reads a path outside ``dirs`` that is not one of the agent's
    own files; else ``None`` (inside, another tool, no working directories known). ``real`` is
    :func:`~.searched.read_target`'s answer when the caller has it (resolved once)."""
    if dirs is None:
        return None
    target = real if real is not None else read_target(tool, arguments, dirs.folders[0], home)
    if target is None:
        return None
    if dirs.holds(target):
        return None
    folder = target if os.path.isdir(target) else os.path.dirname(target)
    return OutsideRead(tool, target, folder, dirs.folders, dirs.block_outside)
