"""The session's working directories, handed to the approval feature.

As in Claude Code, a file tool (``read``, ``grep``, ``find``, ``ls``) reads without asking in the
*working directories*: the project folder (the session's folder) and the folders the user added.
A read elsewhere asks in every mode but ``auto`` (README "Permission rules"). The folders are
added with:

* ``--add-dir DIR`` (repeatable): stored with the session's launch settings, so every worker of
  the session (a restart, ``--continue``) has them;
* ``additional_directories`` in the ``[permissions]`` table of your own ``config.toml``
  (:mod:`coding_agent.settings.config`: a project's file may not set it);
* Claude Code's ``permissions.additionalDirectories`` in ``~/.claude/settings.json`` (a
  project's ``.claude/settings*.json`` may not: a cloned repository could add ``~``; its entry is
  a note saying where to put it instead).

``block_reads_outside_working_directories = true`` (``config.toml``) or Claude Code's
``permissions.blockReadsOutsideWorkingDirectories: true``, from any of those files (it only
restricts), refuses such reads in every mode, ``auto`` included.

The agent's own files never ask: it tells the model to read them itself (:func:`agent_files`).
The value is the harness service :data:`SERVICE` (the approval feature's
``facets_approval.workdirs``; the two never import each other): a read-only mapping whose values
are read again at each decision, so an edited settings file applies to the next call.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from chord import Context, Facet, FacetEnvironment, RemoteServiceError, define_facet
from coding_agent.context.context_files import CONTEXT_FILE_NAMES, scan_context_files
from coding_agent.context.prompt_templates import template_roots
from coding_agent.context.resources import Places
from coding_agent.context.skills import skill_roots
from coding_agent.contracts import WorkingDirsService
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.trust import project_root_for
from coding_agent.settings.xdg import claude_home, config_home

__all__ = ["SERVICE", "TEMP_PREFIX", "WorkingDirectories", "agent_files", "working_dirs_facet"]

SERVICE = "working_directories"
"""The harness service's name (``facets_approval.workdirs.WORKING_DIRECTORIES_SERVICE``)."""

TEMP_PREFIX = "coding-agent-"
"""What the agent's temporary files and folders are called (bash's spill files when no session
folder holds them, the sandbox's ``/tmp``, ``coding-agent acp``'s terminal output, the external
editor's prompt): each is read without asking."""


def agent_files(
    cwd: str | os.PathLike[str], env: Mapping[str, str], session_path: str | os.PathLike[str]
) -> list[str]:
    """The agent's own files and folders, which a read never asks about: the session folder's
    spill files (bash's "Full output: <path>"), its temporary files (:data:`TEMP_PREFIX` in the
    temporary folder), the skill folders (the system prompt tells the model to read a skill's
    ``SKILL.md``), the prompt template folders, the subagent definition folders, the context
    files (``CLAUDE.md``, ``AGENTS.md``) of your own folders and of the folders above the
    project and the files they import, and the folders of the enabled Claude Code plugins.
    Not the configuration files: ``config.toml`` and Claude Code's ``settings.json`` may hold
    keys (``api_key``, ``env``), so a read of them asks like any other file outside."""
    places = Places.find(cwd, env)
    claude = claude_home(env)
    own = config_home(env) / "coding-agent"
    found: list[Path] = [
        Path(session_path) / "spill",
        Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}*",
        # the agent's folder without config.toml (keys): its prompt folders and context files
        *(own / name for name in ("skills", "prompts", "agents", "AGENTS.md", "CLAUDE.md")),
        *(own / name for name in ("SYSTEM.md", "APPEND_SYSTEM.md")),
        *skill_roots(places),
        *template_roots(places),
        claude / "agents",  # the subagent definitions (facets-subagents reads both)
        places.home / ".claude" / "agents",
        claude / "CLAUDE.md",
        places.home / ".pi" / "agent" / "AGENTS.md",
        places.home / ".pi" / "agent" / "CLAUDE.md",
        *_context_chain(project_root_for(cwd)),
        # the context files read now, with the files they import (@~/notes/style.md)
        *(Path(found.path) for found in scan_context_files(cwd, env=env).files),
        # the enabled Claude Code plugins: their skills (and what a skill's SKILL.md points
        # at in its folder), commands and agents
        *(plugin.root for plugin in places.plugins().plugins),
    ]
    project = project_root_for(cwd)
    unique: list[str] = []
    for path in found:
        if str(path) not in unique and not _leaves_project(path, project):
            unique.append(str(path))
    return unique


def _leaves_project(path: Path, project: Path) -> bool:
    """Whether ``path``, one of the project's own folders or files (its ``.claude/skills``, a
    folder its ``.pi/settings.json`` lists), is a link leading outside the project. A cloned
    repository could link ``.claude/skills`` to ``~`` or ``~/.config/coding-agent``: as one of
    the agent's own files, everything there (``config.toml``'s keys) would be read without
    asking. Such a folder is left out, so a read through it asks like any read outside."""
    real_project = project.resolve()
    lexical = Path(os.path.abspath(path))
    if not any(lexical.is_relative_to(root) for root in (project.absolute(), real_project)):
        return False  # not the project's: your own folders may link anywhere
    return not Path(os.path.realpath(lexical)).is_relative_to(real_project)


def _context_chain(project: Path) -> Iterator[Path]:
    """The context files of the folders above ``project`` (read into the system prompt). Not a
    symlink: an unpacked archive opened in its sub-folder could link its ``CLAUDE.md`` to
    ``~/.config/coding-agent`` (a folder of yours), and everything in it would be read without
    asking; a linked file the scan accepted is listed from the scan (:func:`agent_files`)."""
    for folder in project.resolve().parents:
        for name in CONTEXT_FILE_NAMES:
            if not os.path.islink(folder / name):
                yield folder / name


class WorkingDirectories(Mapping[str, Any]):
    """The harness service value (module doc): ``added`` (``--add-dir`` folders, then the
    settings files' ``additionalDirectories``), ``agent`` (:func:`agent_files`) and
    ``blockReadsOutside``; the settings files are read again when one changes."""

    _KEYS = ("added", "agent", "blockReadsOutside")

    def __init__(self, added: Sequence[str], agent: Sequence[str], files: PermissionFiles) -> None:
        self._added = list(added)
        self._agent = list(agent)
        self._files = files

    def add(self, folder: str) -> None:
        """Add ``folder`` (absolute) until the worker stops (``/add-dir``)."""
        if folder not in self._added:
            self._added.append(folder)

    def __getitem__(self, key: str) -> Any:
        if key == "added":
            settings = self._files.working_directories()
            return [*self._added, *(f for f in settings.added if f not in self._added)]
        if key == "agent":
            return list(self._agent)
        if key == "blockReadsOutside":
            return self._files.working_directories().block_reads_outside
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


class _Adding:
    """The served :class:`~coding_agent.contracts.WorkingDirs`."""

    def __init__(self, dirs: WorkingDirectories, cwd: Path, env: Mapping[str, str]) -> None:
        self._dirs = dirs
        self._cwd = cwd
        self._home = env.get("HOME") or os.path.expanduser("~")

    async def add(self, folder: str, ctx: Context) -> str:
        del ctx
        spelled = folder.strip()
        if spelled == "~" or spelled.startswith("~/"):
            spelled = self._home + spelled[1:]
        path = (self._cwd / spelled).resolve() if spelled else None
        if path is None or not path.is_dir():
            message = f"no such folder: {folder or '(none given)'}"
            raise RemoteServiceError("service_invalid_value", message)  # said as it is
        self._dirs.add(str(path))
        return str(path)


WORKING_DIRS_FACET_ID = "coding-agent/working-dirs"


def working_dirs_facet(
    dirs: WorkingDirectories, cwd: str | os.PathLike[str], env: Mapping[str, str]
) -> Facet:
    """The worker facet serving :data:`~coding_agent.contracts.WorkingDirsService` over
    ``dirs`` (``/add-dir``: the folder counts until the worker stops; it is not stored)."""

    def setup(env_: FacetEnvironment) -> None:
        env_.provide(WorkingDirsService, _Adding(dirs, Path(cwd), env))

    return define_facet(WORKING_DIRS_FACET_ID, setup)
