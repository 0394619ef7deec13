"""Project trust: code that comes with a repository runs only in folders the user trusts.

A project may carry its own facet packages in ``.coding-agent/facets/``: each sub-folder is one
facet package folder, exactly what ``--facets-dir`` accepts (a package folder holding
``__init__.py``, or a project folder whose ``pyproject.toml`` declares a ``chord.facets`` entry
point). Loading a facet package *imports* it, so a cloned repository could run anything with
the user's permissions the moment the agent starts in it. Hence the gate:

* **Where the project is.** :func:`project_root_for` walks from the working folder upwards to
  the git root (the first folder holding ``.git``); without one the project is the working folder
  itself. Only folders the user can vouch for take part: the walk stops below the first folder
  that is not owned by the user or that other users may write to (``/tmp``, a shared ``/srv``),
  so nobody else's ``.git`` or ``.coding-agent/`` is ever looked at. The project's own
  configuration is its ``.coding-agent/`` folder (:func:`find_local_config`).
* **Whose it is.** :func:`folder_problem` says why a folder cannot be trusted (another owner,
  writable by others); such a project never loads its packages, ``--trust`` and ``/trust`` refuse
  it with that reason, and the ``/trust`` dialog names the folder and its owner.
* **What the user decided.** A :class:`TrustStore` keeps one :class:`Decision` per project in
  ``$XDG_CONFIG_HOME/coding-agent/trust.json`` (default ``~/.config``), keyed by the project's
  absolute, resolved path::

      {"version": 1, "projects": {"/home/me/repo": {"trusted": true, "at": "2026-11-29T23:40:00Z"}}}

  Writes are atomic (a temporary file, fsync, rename) under an advisory lock, so a crash or two
  agents deciding at once never leave a half-written file. A file that cannot be parsed is an
  error naming it: never silently reset, which would forget "do not trust" decisions.
* **What loads.** :func:`check_project` combines the two for one start of the agent: it records
  a decision given on the command line (``--trust`` / ``--no-trust``), and returns a
  :class:`ProjectTrust` whose :attr:`~ProjectTrust.loaded_dirs` are the local package folders
  to pass on as extra facet folders (none unless trusted) and whose :meth:`~ProjectTrust.warning`
  is the one warning to show when local packages are left out.

Trust is by folder, not by content: a trusted project's packages load as they are now and as
they will be after the next ``git pull``, like a trusted folder in an editor.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import msgspec

from coding_agent.settings.xdg import config_home
from pico3 import write_atomic

__all__ = [
    "LOCAL_CONFIG_DIR",
    "LOCAL_FACETS_DIR",
    "TRUST_FILE_VERSION",
    "Decision",
    "ProjectTrust",
    "TrustError",
    "TrustStore",
    "check_project",
    "find_local_config",
    "folder_owner",
    "folder_problem",
    "is_trusted",
    "local_facets_dirs",
    "project_root_for",
    "trust_path",
]

LOCAL_CONFIG_DIR = ".coding-agent"
"""The folder of a project's own agent configuration."""

LOCAL_FACETS_DIR = f"{LOCAL_CONFIG_DIR}/facets"
"""Where, relative to the project, its facet packages live (one sub-folder each)."""

TRUST_FILE_VERSION = 1


class TrustError(Exception):
    """The trust file cannot be read or written, or a trusted project's facet folder is bad."""


class Decision(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the user decided about one project, and when."""

    trusted: bool
    at: Annotated[datetime, msgspec.Meta(tz=True)]


class _TrustFile(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    projects: dict[str, Decision]


# -- where things are -----------------------------------------------------------------------------
def trust_path(env: Mapping[str, str] | None = None) -> Path:
    """The trust file: ``$XDG_CONFIG_HOME/coding-agent/trust.json``."""
    return config_home(env) / "coding-agent" / "trust.json"


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, uid: int) -> bool:
    """Whether ``gid`` is ``uid``'s own user-private group (named after the user, no members
    but the user): group write on it gives nobody else access."""
    try:
        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return (
        user.pw_gid == gid
        and group.gr_name == user.pw_name
        and all(member == user.pw_name for member in group.gr_mem)
    )


def folder_owner(folder: str | os.PathLike[str]) -> str:
    """The user name owning ``folder`` (``uid N`` when the uid has no name)."""
    return _user_name(os.stat(folder).st_uid)


def folder_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why ``folder`` cannot be trusted to hold the user's project, or ``None`` when it can.

    It can when it is owned by the user running the agent and no other user may write to it
    (neither world-writable nor group-writable, unless the group is the user's private one).
    """
    try:
        info = os.stat(folder)
    except OSError as error:
        return f"cannot be examined ({error.strerror})"
    uid = os.geteuid()
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if info.st_uid != uid:
        return f"is owned by {_user_name(info.st_uid)}, not by you ({_user_name(uid)})"
    if info.st_mode & stat.S_IWOTH:
        return f"is writable by every user ({mode})"
    if info.st_mode & stat.S_IWGRP and not _private_group(info.st_gid, uid):
        try:
            group = grp.getgrgid(info.st_gid).gr_name
        except KeyError:
            group = f"gid {info.st_gid}"
        return f"is writable by group {group} ({mode})"
    return None


def _upwards(start: str | os.PathLike[str]) -> Iterator[Path]:
    """``start`` (resolved) and its parents, stopping after the git root, at ``/``, or before
    the first folder that :func:`folder_problem` rejects (``start`` itself is always given)."""
    folder = Path(start).expanduser().resolve()
    for candidate in (folder, *folder.parents):
        if candidate != folder and folder_problem(candidate) is not None:
            return  # nothing at or above another user's (or a shared) folder is ours
        yield candidate
        if (candidate / ".git").exists():  # a folder (a clone) or a file (a worktree)
            return


def project_root_for(start: str | os.PathLike[str]) -> Path:
    """The project ``start`` is in: its git root, found through folders the user owns and
    nobody else may write to (see :func:`_upwards`); without one, ``start`` itself. Always
    absolute and resolved."""
    folders = list(_upwards(start))
    if (folders[-1] / ".git").exists():
        return folders[-1]
    return folders[0]


def find_local_config(start: str | os.PathLike[str]) -> Path | None:
    """The project's ``.coding-agent/`` folder (in :func:`project_root_for`), or ``None`` when it
    has none, or when it or the project is not the user's own (see :func:`folder_problem`)."""
    root = project_root_for(start)
    local = root / LOCAL_CONFIG_DIR
    if not local.is_dir() or folder_problem(root) is not None or folder_problem(local) is not None:
        return None
    return local


def local_facets_dirs(project: str | os.PathLike[str]) -> list[Path]:
    """The facet package folders in ``project``'s ``.coding-agent/facets/``, sorted by name.

    Every sub-folder counts except hidden ones and ``_``-prefixed ones (``__pycache__``); loose
    files are ignored. Nothing is imported or validated here: see :func:`check_project`.
    """
    facets = Path(project) / LOCAL_FACETS_DIR
    if not facets.is_dir():
        return []
    return sorted(
        entry.resolve()
        for entry in facets.iterdir()
        if entry.is_dir() and not entry.name.startswith((".", "_"))
    )


# -- the trust store ------------------------------------------------------------------------------
def _key(project: str | os.PathLike[str]) -> str:
    return str(Path(project).expanduser().resolve())


class TrustStore:
    """The user's trust decisions, one per project folder, in a JSON file (see module docs).

    Every call reads the file afresh: another agent may have decided meanwhile.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def default(cls, env: Mapping[str, str] | None = None) -> TrustStore:
        """The store at :func:`trust_path` (``env`` defaults to ``os.environ``)."""
        return cls(trust_path(env))

    def load(self) -> dict[str, Decision]:
        """Every decision by project path. A missing file is empty; a bad one raises
        :class:`TrustError` naming the file and what is wrong with it."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise TrustError(f"{self.path}: cannot read the trust file: {error.strerror}") from None
        try:
            data = msgspec.json.decode(raw, type=_TrustFile)
        except msgspec.DecodeError as error:
            raise TrustError(
                f"{self.path}: the trust file is corrupt ({error}); fix or delete it "
                "(deleting it forgets every trust decision)"
            ) from None
        if data.version != TRUST_FILE_VERSION:
            raise TrustError(
                f"{self.path}: unsupported trust file version {data.version} "
                f"(this coding-agent knows version {TRUST_FILE_VERSION})"
            )
        for project in data.projects:
            if not os.path.isabs(project):
                raise TrustError(f"{self.path}: project {project!r} is not an absolute path")
        return data.projects

    def get(self, project: str | os.PathLike[str]) -> Decision | None:
        """The decision about ``project`` (resolved first), or ``None`` when there is none."""
        return self.load().get(_key(project))

    def set(
        self, project: str | os.PathLike[str], trusted: bool, *, at: datetime | None = None
    ) -> Decision:
        """Record that ``project`` is (or is not) ``trusted``; returns the stored decision.

        Reads, updates and atomically replaces the file while holding its lock; a corrupt file
        raises :class:`TrustError` and is left as it is.
        """
        when = at if at is not None else datetime.now(UTC).replace(microsecond=0)
        if when.tzinfo is None:
            raise ValueError("the decision time must be timezone-aware")
        decision = Decision(trusted=trusted, at=when)
        key = _key(project)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if stat.S_IMODE(os.stat(self.path.parent).st_mode) != 0o700:
                os.chmod(self.path.parent, 0o700)  # ours, and private whatever the umask
            with self._locked():
                projects = dict(self.load())
                projects[key] = decision
                record = _TrustFile(
                    version=TRUST_FILE_VERSION, projects=dict(sorted(projects.items()))
                )
                self._replace(msgspec.json.format(msgspec.json.encode(record)) + b"\n")
        except OSError as error:
            raise TrustError(f"{self.path}: cannot write the trust file: {error}") from None
        return decision

    @contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(f".{self.path.name}.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the lock

    def _replace(self, data: bytes) -> None:
        write_atomic(self.path, data)


def is_trusted(project: str | os.PathLike[str], store: TrustStore | None = None) -> bool:
    """Whether the user trusts ``project`` (no decision means no)."""
    decision = (store if store is not None else TrustStore.default()).get(project)
    return decision is not None and decision.trusted


# -- one start of the agent -----------------------------------------------------------------------
class ProjectTrust(msgspec.Struct, frozen=True):
    """The trust picture of one project at one start: what it carries and what may load."""

    root: Path
    """The project folder (see :func:`project_root_for`)."""
    facets_dirs: tuple[Path, ...]
    """Every local facet package folder, loaded or not."""
    decision: Decision | None
    """The user's decision about :attr:`root`, if any."""
    owner: str = ""
    """Who owns :attr:`root` (a user name)."""
    problem: str | None = None
    """Why :attr:`root` (or its ``.coding-agent/``) can never be trusted, e.g. ``"/tmp/x is
    writable by every user (mode 0777)"``; ``None`` when it is the user's own."""

    @property
    def trusted(self) -> bool:
        return self.problem is None and self.decision is not None and self.decision.trusted

    @property
    def loaded_dirs(self) -> tuple[Path, ...]:
        """The folders to load as extra facet packages: all of them when trusted, else none."""
        return self.facets_dirs if self.trusted else ()

    def warning(self, remedy: str = "/trust") -> str | None:
        """The warning to show once when local packages exist but are not loaded (``None``
        otherwise); ``remedy`` is how to trust the folder where it is shown (``--trust``)."""
        if self.trusted or not self.facets_dirs:
            return None
        count = len(self.facets_dirs)
        packages = "facet package" if count == 1 else "facet packages"
        if self.problem is not None:
            return (
                f"This project has {count} local {packages} ({LOCAL_FACETS_DIR}): not loaded, "
                f"and never will be: {self.problem}"
            )
        why = " (this folder is marked untrusted)" if self.decision is not None else ""
        return (
            f"This project has {count} local {packages} ({LOCAL_FACETS_DIR}): not loaded{why}. "
            f"{remedy} to trust this folder"
        )


def _project_problem(root: Path) -> str | None:
    """Why ``root``, its ``.coding-agent/`` or its ``facets/`` folder is not the user's own."""
    for folder in (root, root / LOCAL_CONFIG_DIR, root / LOCAL_FACETS_DIR):
        if folder != root and not folder.is_dir():
            break
        problem = folder_problem(folder)
        if problem is not None:
            return f"{folder} {problem}"
    return None


def check_project(
    start: str | os.PathLike[str],
    *,
    decide: bool | None = None,
    store: TrustStore | None = None,
) -> ProjectTrust:
    """The trust picture of the project ``start`` is in, for one start of the agent.

    ``decide`` records a decision first (``True``: ``--trust``, ``False``: ``--no-trust``;
    ``None``: only read). A project that is not the user's own (another owner, or writable by
    other users: :func:`folder_problem`) is never trusted: ``decide=True`` raises
    :class:`TrustError` saying why. When the project is trusted every local folder must be a
    facet package folder the user owns: a bad one raises :class:`TrustError` naming it, before
    anything is loaded.
    """
    store = store if store is not None else TrustStore.default()
    root = project_root_for(start)
    problem = _project_problem(root)
    if decide and problem is not None:
        raise TrustError(f"refusing to trust this project: {problem}")
    decision = store.set(root, decide) if decide is not None else store.get(root)
    project = ProjectTrust(
        root,
        tuple(local_facets_dirs(root)),
        decision,
        owner=folder_owner(root),
        problem=problem,
    )
    for folder in project.loaded_dirs:
        unsafe = folder_problem(folder)
        if unsafe is not None:
            raise TrustError(f"local facet package {folder} {unsafe}: not loaded")
        _check_facet_package(folder)
    return project


def _check_facet_package(folder: Path) -> None:
    """Raise :class:`TrustError` unless ``folder`` holds a facet package chord can load."""
    # lazy: start-up time (chord.facet_packages is imported only for a project that has local
    # facet packages; a TUI loads it after its first frame)
    from chord import FacetDiscoveryError, facet_package_from_folder

    try:
        facet_package_from_folder(folder)
    except FacetDiscoveryError as error:
        raise TrustError(f"local facet package: {error}") from None
