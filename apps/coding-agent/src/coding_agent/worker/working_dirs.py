"""The session's working directories, handed to the approval feature.

As in Claude Code, a file tool (``read``, ``grep``, ``find``, ``ls``) reads without asking in the
*working directories*: the project folder (the session's folder) and the folders the user added.
A read elsewhere asks in every mode but ``auto`` (README "Permission rules"). The folders are
added with:

* ``--add-dir DIR`` (repeatable) and ``/add-dir DIR`` in the TUI: stored with the session's
  launch settings (:func:`session_keeper`), so every worker of the session (a restart,
  ``--continue``, a failover to another server) has them;
* ``additional_directories`` in the ``[permissions]`` table of your own ``config.toml``
  (:mod:`coding_agent.settings.config`: a project's file may not set it); ``/add-dir --remember
  DIR`` appends to it (:meth:`~coding_agent.settings.permissions.PermissionFiles.add_directory`);
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

import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from chord import BACKGROUND, Context, Facet, FacetEnvironment, RemoteServiceError, define_facet
from coding_agent.context.context_files import CONTEXT_FILE_NAMES, scan_context_files
from coding_agent.context.prompt_templates import template_roots
from coding_agent.context.resources import Places
from coding_agent.context.skills import skill_roots
from coding_agent.contracts import WorkingDirsService
from coding_agent.session_files.folders import Session, SessionError, load_session, update_settings
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.trust import project_root_for
from coding_agent.settings.xdg import claude_home, config_home
from coding_agent.worker.shared_state import StorageBox, store_settings

__all__ = [
    "SERVICE",
    "TEMP_PREFIX",
    "Keep",
    "WorkingDirectories",
    "agent_files",
    "session_keeper",
    "working_dirs_facet",
]

_log = logging.getLogger(__name__)

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
        """Add ``folder`` (absolute) for this worker; ``/add-dir`` has stored it with the
        session first (:func:`session_keeper`), so the next worker starts with it."""
        if folder not in self._added:
            self._added.append(folder)

    @property
    def files(self) -> PermissionFiles:
        """The settings files adding folders (``config.toml``, ``~/.claude/settings.json``)."""
        return self._files

    def session_folders(self) -> list[str]:
        """The folders of the session itself (``--add-dir``, ``/add-dir``), in order."""
        return list(self._added)

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


Keep = Callable[[str], Awaitable[None]]
"""Stores a folder (absolute) with the session's launch settings (:func:`session_keeper`)."""


def session_keeper(session: Session, box: StorageBox | None) -> Keep:
    """What ``/add-dir`` stores a folder with: the session's launch settings, in
    ``session.json``, beside ``--add-dir``'s folders (:func:`update_settings`: read again
    first, written atomically and ``fsync``-ed), so a restarted worker, ``--continue`` and
    ``--resume`` start with it; on PostgreSQL in the session's blobs too, so a worker of
    another server does after a failover. Raises ``OSError``/``SessionError`` when
    ``session.json`` cannot be written (the folder is then not added)."""

    async def keep(folder: str) -> None:
        current = load_session(session.path)
        settings = current.settings
        if folder in settings.add_dirs:
            return
        added = msgspec.structs.replace(settings, add_dirs=(*settings.add_dirs, folder))
        update_settings(current, added)
        if box is not None:
            try:
                await store_settings(box, current, BACKGROUND)
            except Exception as error:  # a lost lease: this worker stops at its next commit
                _log.warning("could not store the session's launch settings: %s", error)

    return keep


def _invalid(message: str) -> RemoteServiceError:
    return RemoteServiceError("service_invalid_value", message)  # said as it is, one line


class _Adding:
    """The served :class:`~coding_agent.contracts.WorkingDirs`."""

    def __init__(
        self, dirs: WorkingDirectories, cwd: Path, env: Mapping[str, str], keep: Keep | None
    ) -> None:
        self._dirs = dirs
        self._cwd = cwd
        self._project = os.path.realpath(cwd)
        self._home = env.get("HOME") or os.path.expanduser("~")
        self._keep = keep

    def _folder(self, given: str) -> tuple[str, str]:
        """The real folder ``given`` names (``~`` expanded, relative to the project folder)
        and the words saying what a relative one became; a one-line error for nothing given,
        a missing folder, a file, the project folder or a folder inside it."""
        spelled = given.strip()
        if not spelled:
            raise _invalid("give a folder: /add-dir DIR (/add-dir alone lists them)")
        expanded = spelled
        if spelled == "~" or spelled.startswith("~/"):
            expanded = self._home + spelled[1:]
        path = os.path.realpath(self._cwd / expanded)
        became = "" if os.path.isabs(expanded) else f" ({spelled} from the project {self._cwd})"
        if not os.path.lexists(path):
            raise _invalid(f"no such folder: {spelled} ({path}); nothing was added")
        if not os.path.isdir(path):
            raise _invalid(
                f"{spelled} is a file, not a folder ({path}): add its folder, "
                f"/add-dir {os.path.dirname(path)}"
            )
        if path == self._project or path.startswith(self._project.rstrip(os.sep) + os.sep):
            if path == self._project:
                raise _invalid(f"{path} is the project folder: already a working directory")
            raise _invalid(
                f"{path} is inside the project {self._project}: already a working directory"
            )
        return path, became

    def _held(self, path: str, settings: bool) -> str | None:
        """Where ``path`` is already a working directory from (the folder holding it and the
        file or session that adds it), or ``None``: the session's folders unless
        ``settings``, the settings files' always."""
        found = [] if settings else [(f, "this session") for f in self._dirs.session_folders()]
        working = self._dirs.files.working_directories()
        found += [(f, source) for f, source in zip(working.added, working.sources, strict=True)]
        for folder, source in found:
            real = os.path.realpath(folder)
            if path == real or path.startswith(real.rstrip(os.sep) + os.sep):
                inside = "" if path == real else f"inside {real}, "
                return f"{inside}from {source}"
        return None

    async def add(self, folder: str, ctx: Context) -> str:
        del ctx
        path, became = self._folder(folder)
        held = self._held(path, settings=False)
        if held is not None:
            return f"{path}{became} is already a working directory ({held}): nothing written"
        if self._keep is not None:
            try:
                await self._keep(path)
            except (OSError, SessionError) as error:
                raise _invalid(f"cannot keep {path} with the session: {error}") from None
        self._dirs.add(path)
        return (
            f"Added {path}{became} as a working directory, kept with this session (its next "
            "worker and --continue too): files there are read without asking"
        )

    async def remember(self, folder: str, ctx: Context) -> str:
        del ctx
        path, became = self._folder(folder)
        held = self._held(path, settings=True)
        if held is not None:
            return f"{path}{became} is already a working directory of every session ({held}): nothing written"
        try:
            written, fresh = self._dirs.files.add_directory(path)
        except (ValueError, OSError) as error:
            raise _invalid(f"cannot remember {path}: {error}") from None
        if not fresh:
            return (
                f"{path}{became} is already in additional_directories of {written}: nothing written"
            )
        return (
            f"Added {path}{became} as a working directory of every session: appended to "
            f"additional_directories in {written}"
        )

    async def listing(self, ctx: Context) -> list[dict[str, str]]:
        del ctx
        rows = [{"folder": self._project, "from": "the project"}]
        for folder in self._dirs.session_folders():
            rows.append({"folder": folder, "from": "this session (--add-dir or /add-dir)"})
        working = self._dirs.files.working_directories()
        for folder, source in zip(working.added, working.sources, strict=True):
            same = [row for row in rows if row["folder"] == folder]
            if same:  # a session's folder you also remembered: both say where it comes from
                same[0]["from"] += f"; also {source}"
            else:
                rows.append({"folder": folder, "from": source})
        return rows


WORKING_DIRS_FACET_ID = "coding-agent/working-dirs"


def working_dirs_facet(
    dirs: WorkingDirectories,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    keep: Keep | None = None,
) -> Facet:
    """The worker facet serving :data:`~coding_agent.contracts.WorkingDirsService` over
    ``dirs``: ``/add-dir`` stores a folder with ``keep`` (:func:`session_keeper`; without it
    the folder counts until the worker stops), ``/add-dir --remember`` in your own
    ``config.toml``, ``/add-dir`` alone lists them."""

    def setup(env_: FacetEnvironment) -> None:
        env_.provide(WorkingDirsService, _Adding(dirs, Path(cwd), env, keep))

    return define_facet(WORKING_DIRS_FACET_ID, setup)
