"""Project trust: code that comes with a repository runs only in folders the user trusts.

A project may carry its own facet packages in ``.coding-agent/facets/``: each sub-folder is one
facet package folder, exactly what ``--facets-dir`` accepts (a package folder holding
``__init__.py``, or a project folder whose ``pyproject.toml`` declares a ``chord.facets`` entry
point). Loading a facet package *imports* it, so a cloned repository could run anything with
the user's permissions the moment the agent starts in it. Hence the gate:

* **Where the project is.** :func:`project_root_for` walks from the working folder upwards to
  the git root (the first folder holding ``.git``, an empty one only with no repository above
  it, as git passes over it); without one the project is the working folder
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

One exception, as in Claude Code: **the MCP servers of the project's ``.mcp.json``** start only
once the user approved each of them as it is written. Trusting a folder (``--trust``,
``/trust``) approves the servers the file lists then; a server added or changed later (by a
``git pull``, or by a command the agent ran: the sandbox cannot keep a file that does not exist
yet from being created) waits, named at start and in ``/mcp``, until ``/trust`` (or
``--trust``) shows it and the user agrees. :meth:`TrustStore.approve_servers` keeps a
fingerprint of each approved entry in ``server-approvals.json`` beside the trust file (a file of
its own, so an older coding-agent still reads ``trust.json``), and :func:`check_project_servers`
says which of the file's servers are approved. A project trusted before approvals were kept has
no record: its servers as they are at the first start that reads it are recorded as approved.
"""

from __future__ import annotations

import fcntl
import grp
import json
import os
import pwd
import stat
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import msgspec

from coding_agent.settings.xdg import config_home
from pico3 import write_atomic

__all__ = [
    "LOCAL_CONFIG_DIR",
    "LOCAL_FACETS_DIR",
    "PROJECT_SERVERS_FILE",
    "TRUST_FILE_VERSION",
    "Decision",
    "ProjectServers",
    "ProjectTrust",
    "ServerApproval",
    "TrustError",
    "TrustStore",
    "check_project",
    "check_project_servers",
    "find_local_config",
    "folder_owner",
    "folder_problem",
    "is_trusted",
    "local_facets_dirs",
    "project_root_for",
    "project_servers",
    "read_store_file",
    "server_fingerprint",
    "trust_path",
    "updating_store_file",
]

LOCAL_CONFIG_DIR = ".coding-agent"
"""The folder of a project's own agent configuration."""

LOCAL_FACETS_DIR = f"{LOCAL_CONFIG_DIR}/facets"
"""Where, relative to the project, its facet packages live (one sub-folder each)."""

PROJECT_SERVERS_FILE = ".mcp.json"
"""The project's MCP servers (Claude Code's project scope), relative to the project."""

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


class ServerApproval(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The project MCP servers the user approved, each as it was written, and when."""

    servers: dict[str, str]
    """Server name -> :func:`server_fingerprint` of its entry when approved."""
    at: Annotated[datetime, msgspec.Meta(tz=True)]


class _ApprovalsFile(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    projects: dict[str, ServerApproval]


_File = TypeVar("_File", _TrustFile, _ApprovalsFile)


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


def _git_entry(folder: Path) -> str | None:
    """What ``folder``'s ``.git`` is: ``"repository"`` (a folder with something in it, a clone;
    a file, a worktree), ``"empty"`` (an empty folder) or ``None`` (none there)."""
    entry = folder / ".git"
    try:
        with os.scandir(entry) as listing:
            return "repository" if next(listing, None) is not None else "empty"
    except NotADirectoryError:
        return "repository"
    except OSError:
        return "repository" if entry.exists() else None


def _upwards(start: str | os.PathLike[str]) -> Iterator[Path]:
    """``start`` (resolved) and its parents, stopping after the git root, at ``/``, or before
    the first folder that :func:`folder_problem` rejects (``start`` itself is always given).
    An empty ``.git`` folder does not stop the walk (see :func:`project_root_for`)."""
    folder = Path(start).expanduser().resolve()
    for candidate in (folder, *folder.parents):
        if candidate != folder and folder_problem(candidate) is not None:
            return  # nothing at or above another user's (or a shared) folder is ours
        yield candidate
        if _git_entry(candidate) == "repository":
            return


def project_root_for(start: str | os.PathLike[str]) -> Path:
    """The project ``start`` is in: its git root, found through folders the user owns and
    nobody else may write to (see :func:`_upwards`); without one, ``start`` itself. Always
    absolute and resolved. An empty ``.git`` folder is a git root only with no repository
    above it: git passes over it to the outer one, and so does this (the sandbox lays one in
    a session folder inside a repository while a command runs, and a project's root must not
    move to that folder then, leaving the outer project's configuration behind)."""
    folders = list(_upwards(start))
    if _git_entry(folders[-1]) == "repository":
        return folders[-1]
    return next((f for f in folders if _git_entry(f) == "empty"), folders[0])


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
    """The user's trust decisions, one per project folder, in a JSON file (see module docs), and
    beside it the project MCP servers each project's user approved (``server-approvals.json``).

    Every call reads the files afresh: another agent may have decided meanwhile.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.approvals_path = self.path.with_name("server-approvals.json")

    @classmethod
    def default(cls, env: Mapping[str, str] | None = None) -> TrustStore:
        """The store at :func:`trust_path` (``env`` defaults to ``os.environ``)."""
        return cls(trust_path(env))

    def load(self) -> dict[str, Decision]:
        """Every decision by project path. A missing file is empty; a bad one raises
        :class:`TrustError` naming the file and what is wrong with it."""
        data = self._read(self.path, _TrustFile, "trust file", "every trust decision")
        return {} if data is None else data.projects

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
        decision = Decision(trusted=trusted, at=_when(at))
        with self._updating(self.path, "trust file"):
            projects = dict(self.load())
            projects[_key(project)] = decision
            self._write(self.path, _TrustFile(TRUST_FILE_VERSION, dict(sorted(projects.items()))))
        return decision

    def approved_servers(self, project: str | os.PathLike[str]) -> ServerApproval | None:
        """Which of ``project``'s ``.mcp.json`` servers the user approved, or ``None`` when
        nothing was ever recorded for it. A bad file raises :class:`TrustError` naming it."""
        data = self._read(
            self.approvals_path, _ApprovalsFile, "server approvals file", "every approval"
        )
        return None if data is None else data.projects.get(_key(project))

    def approve_servers(
        self,
        project: str | os.PathLike[str],
        servers: Mapping[str, Any],
        *,
        at: datetime | None = None,
    ) -> ServerApproval:
        """Record ``servers`` (name -> entry, as :func:`project_servers` returns them) as
        ``project``'s approved servers, replacing what was approved before."""
        approval = ServerApproval(
            {name: server_fingerprint(entry) for name, entry in sorted(servers.items())},
            _when(at),
        )
        with self._updating(self.approvals_path, "server approvals file"):
            data = self._read(
                self.approvals_path, _ApprovalsFile, "server approvals file", "every approval"
            )
            projects = {} if data is None else dict(data.projects)
            projects[_key(project)] = approval
            self._write(
                self.approvals_path,
                _ApprovalsFile(TRUST_FILE_VERSION, dict(sorted(projects.items()))),
            )
        return approval

    def _read(self, path: Path, kind: type[_File], what: str, forgets: str) -> _File | None:
        data = read_store_file(path, kind, what, forgets, TrustError)
        for project in () if data is None else data.projects:
            if not os.path.isabs(project):
                raise TrustError(f"{path}: project {project!r} is not an absolute path")
        return data

    def _updating(self, path: Path, what: str) -> AbstractContextManager[None]:
        """Hold the store's lock (the trust file's, for both its files) around a
        read-update-replace of ``path``; an ``OSError`` becomes :class:`TrustError`."""
        return updating_store_file(path, self.path, what, TrustError)

    def _write(self, path: Path, record: _TrustFile | _ApprovalsFile) -> None:
        write_atomic(path, msgspec.json.format(msgspec.json.encode(record)) + b"\n")


class _Versioned(Protocol):
    version: int


_Record = TypeVar("_Record", bound=_Versioned)


def read_store_file(
    path: Path, kind: type[_Record], what: str, forgets: str, error: type[Exception]
) -> _Record | None:
    """One of the user's small JSON stores (``{"version": 1, ...}``: the trust file, the
    server approvals, the git approvals) decoded as ``kind``; ``None`` when it does not exist.
    A file that cannot be read, does not parse or has another version raises ``error`` naming
    it; it is never reset (``forgets`` says what deleting it would forget)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as failure:
        raise error(f"{path}: cannot read the {what}: {failure.strerror}") from None
    try:
        data = msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as failure:
        raise error(
            f"{path}: the {what} is corrupt ({failure}); fix or delete it "
            f"(deleting it forgets {forgets})"
        ) from None
    if data.version != TRUST_FILE_VERSION:
        raise error(
            f"{path}: unsupported {what} version {data.version} "
            f"(this coding-agent knows version {TRUST_FILE_VERSION})"
        )
    return data


@contextmanager
def updating_store_file(
    path: Path, lock_of: Path, what: str, error: type[Exception]
) -> Iterator[None]:
    """Hold ``lock_of``'s advisory lock (``.NAME.lock`` beside it) around a read-update-replace
    of ``path``, whose folder is made private first; an ``OSError`` becomes ``error`` naming
    the file. The replace itself is :func:`pico3.write_atomic`'s."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if stat.S_IMODE(os.stat(path.parent).st_mode) != 0o700:
            os.chmod(path.parent, 0o700)  # ours, and private whatever the umask
        lock = lock_of.with_name(f".{lock_of.name}.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the lock
    except OSError as failure:
        raise error(f"{path}: cannot write the {what}: {failure}") from None


def _when(at: datetime | None) -> datetime:
    when = at if at is not None else datetime.now(UTC).replace(microsecond=0)
    if when.tzinfo is None:
        raise ValueError("the decision time must be timezone-aware")
    return when


def project_servers(project: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The servers of ``project``'s ``.mcp.json`` as written (name -> entry): the file's
    ``mcpServers`` objects, except the ones marked ``"disabled": true``. Empty when the file is
    missing or not a JSON object; facets-mcp reports what is wrong with it."""
    try:
        data = json.loads((Path(project) / PROJECT_SERVERS_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    entries = data.get("mcpServers") if isinstance(data, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(entries, dict):
        return {}
    return {
        str(name): entry  # pyright: ignore[reportUnknownArgumentType]
        for name, entry in entries.items()  # pyright: ignore[reportUnknownVariableType]
        if isinstance(entry, dict) and entry.get("disabled") is not True  # pyright: ignore[reportUnknownMemberType]
    }


def server_fingerprint(entry: Any) -> str:
    """A digest of one server entry as written: any change to its command, arguments,
    environment, URL, headers or ``sandbox`` flag changes it; key order and spacing do not."""
    # lazy: start-up time (a start reads fingerprints only in a project that has .mcp.json)
    import hashlib

    text = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class ProjectServers(msgspec.Struct, frozen=True):
    """Which of a trusted project's ``.mcp.json`` servers may start."""

    approved: dict[str, dict[str, Any]]
    """The servers approved as they are written now (name -> entry)."""
    waiting: tuple[str, ...]
    """The servers added or changed since the user approved the file's servers: not started
    until ``/trust`` (or ``--trust``) approves them."""


def check_project_servers(
    project: str | os.PathLike[str],
    store: TrustStore | None = None,
    servers: Mapping[str, dict[str, Any]] | None = None,
) -> ProjectServers:
    """Split the servers of the (trusted) ``project``'s ``.mcp.json`` (``servers``, when given,
    as :func:`project_servers` read them before) into approved and waiting.

    A project with no approval record (trusted before approvals were kept) has its servers as
    they are now recorded as approved, once; when that record cannot be written they are
    approved for this start only. A bad approvals file raises :class:`TrustError`.
    """
    store = store if store is not None else TrustStore.default()
    servers = dict(servers) if servers is not None else project_servers(project)
    record = store.approved_servers(project)
    if record is None:
        with suppress(TrustError):
            store.approve_servers(project, servers)
        return ProjectServers(servers, ())
    approved = {
        name: entry
        for name, entry in servers.items()
        if record.servers.get(name) == server_fingerprint(entry)
    }
    return ProjectServers(approved, tuple(name for name in servers if name not in approved))


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
    if decide:  # --trust approves the project's MCP servers as they are written now
        store.approve_servers(root, project_servers(root))
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
