"""Session folders: where a coding-agent session lives on disk, and how to find one again.

Every session is one folder under ``$XDG_STATE_HOME/coding-agent/sessions/`` (default
``~/.local/state``), named by its id, ``YYYYmmdd-HHMMSS-xxxxxx`` (UTC creation time plus six hex
digits, so names sort by age) or the UUID a ``--session-id`` gave it
(:mod:`coding_agent.session_files.forks`)::

    <sessions>/<id>/
      session.json   {"version": 1, "id", "cwd", "created", "model"?, "settings"?}
      storage/       the harness's JSONL storage
      worker.lock    held (flock) by the worker serving the session
      worker.sock    the worker's Unix socket (see Session.socket_path)
      worker.log     where a supervisor sends the worker's stderr
      activity       when the user last did something in it (see below)

*Last activity* — what ``--continue`` and every session list order by — is the time of the
user's last prompt or command, written to ``activity`` (``{"at": ISO 8601 UTC, "branch": N}``)
by the worker when it admits one (:func:`record_activity`); ``branch`` is the conversation the
user last prompted in or made (:meth:`Session.current_branch`, what ``export`` exports). It is never a file time: a worker that lingers and
stops later touches the storage files but did nothing the user did, and a session opened and
left untouched keeps its creation time. A session of an older version without the file falls
back on the newest message time in its log, else its creation.

The worker and every client compute paths through :class:`Session`, never by hand::

    session = create_session(Path.cwd())
    session.socket_path                      # what the worker listens on
    latest_session(Path.cwd())               # --continue: the one prompted last
    open_session("20261129-2135")            # --resume with an id or a unique prefix

A Unix socket path must fit in ``sun_path`` (about 104 bytes). When ``<folder>/worker.sock`` would
not, the socket moves to a short path in the temp folder derived from the session folder, so the
worker and its clients still agree without talking. That folder, ``$TMPDIR/coding-agent-<uid>/``,
must be the user's own with mode ``0700`` (:func:`coding_agent.session_files.private.socket_folder`).

Every folder here is ``0700`` and every file ``0600``, whatever the umask
(:mod:`coding_agent.session_files.private`).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from coding_agent.session_files.private import (
    PRIVATE_FILE,
    PrivacyError,
    private_dir,
    private_tree,
)
from coding_agent.settings.xdg import state_home
from pico3 import write_atomic

__all__ = [
    "METADATA_LIMIT",
    "METADATA_VERSION",
    "SOCKET_PATH_LIMIT",
    "LaunchSettings",
    "Session",
    "SessionError",
    "SessionMetadata",
    "adopt_session",
    "check_writable",
    "create_session",
    "latest_session",
    "list_sessions",
    "load_session",
    "open_regular",
    "open_session",
    "read_regular",
    "record_activity",
    "remove_session",
    "sessions_root",
    "update_settings",
]

METADATA_VERSION = 1
"""The ``version`` written to ``session.json``."""

SOCKET_PATH_LIMIT = 100
"""Longest socket path used as is (``sun_path`` is 104 bytes on macOS, 108 on Linux)."""


class SessionError(Exception):
    """A session that cannot be created, found or read; the message names the path or id."""


class LaunchSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    """How the session's workers run: stored in ``session.json`` when the session starts,
    updated when a later command line (or ``/model``, ``/thinking`` in a TUI) changes them, and
    read by every worker of the session (a supervisor's restart, ``--continue``, ``--resume``,
    ``/resume``, ``attach``). ``None`` / empty means "not chosen": the default applies."""

    model: str | None = None
    thinking: str | None = None
    permission_mode: str | None = None
    tool_calling: str | None = None
    dev: bool = False
    facets_dirs: tuple[str, ...] = ()
    add_dirs: tuple[str, ...] = ()
    """``--add-dir``: more working directories (absolute; the file tools read there unasked)."""
    trust: bool | None = None
    faux_script: str | None = None
    linger: float | None = None

    def present_add_dirs(self) -> tuple[str, ...]:
        """The stored :attr:`add_dirs` that are folders now: one removed since (a temporary
        folder, an unmounted drive) does not count, and does not stop the session from
        starting; it counts again once it is back (:meth:`gone_add_dirs` says which)."""
        return tuple(folder for folder in self.add_dirs if os.path.isdir(folder))

    def gone_add_dirs(self) -> list[str]:
        """A warning per stored folder that is not a folder now (see :meth:`present_add_dirs`)."""
        return [
            f"--add-dir {folder} (kept with this session) is no longer a folder: it does not "
            "count until it is back, so reads there ask (/add-dir lists the folders)"
            for folder in self.add_dirs
            if not os.path.isdir(folder)
        ]


class SessionMetadata(msgspec.Struct, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    """The contents of ``session.json``."""

    version: int
    id: str
    cwd: str
    created: str
    model: str | None = None
    settings: LaunchSettings | None = None


def sessions_root(env: Mapping[str, str] | None = None) -> Path:
    """The folder holding every session folder."""
    return state_home(env) / "coding-agent" / "sessions"


class Session(msgspec.Struct, frozen=True):
    """One session folder and what ``session.json`` says about it."""

    path: Path
    metadata: SessionMetadata

    @property
    def id(self) -> str:
        """The session id (the folder name)."""
        return self.metadata.id

    @property
    def cwd(self) -> Path:
        """The project folder the session works in."""
        return Path(self.metadata.cwd)

    @property
    def created(self) -> datetime:
        """When the session was created (UTC)."""
        return datetime.fromisoformat(self.metadata.created)

    @property
    def model(self) -> str | None:
        """The ``provider/id`` chosen when the session was created, if any."""
        return self.metadata.model

    @property
    def settings(self) -> LaunchSettings:
        """The launch settings stored with the session (the model too, for older sessions)."""
        settings = self.metadata.settings or LaunchSettings()
        if settings.model is None and self.metadata.model is not None:
            settings = msgspec.structs.replace(settings, model=self.metadata.model)
        return settings

    def last_active(self) -> float:
        """When the user last prompted or commanded in the session (POSIX seconds): the
        ``activity`` record, else the newest message time in the log's tail, else creation
        (see the module docstring). Never a file time."""
        at = self._activity().get("at")
        if isinstance(at, str):
            try:
                return datetime.fromisoformat(at).timestamp()
            except ValueError:
                pass
        logged = _newest_message_time(self.storage_dir / "main.jsonl")
        return logged if logged is not None else self.created.timestamp()

    def used(self) -> bool:
        """True once the user prompted or commanded in the session: an ``activity`` record,
        else a message in the log's tail (a session from before the record existed)."""
        if isinstance(self._activity().get("at"), str):
            return True
        return _newest_message_time(self.storage_dir / "main.jsonl") is not None

    def current_branch(self) -> int | None:
        """The conversation the user last prompted in or made (the ``activity`` record's
        ``branch``), or ``None`` when none is recorded."""
        branch = self._activity().get("branch")
        return branch if type(branch) is int else None

    def _activity(self) -> dict[str, object]:
        try:
            raw = read_regular(self.activity_path, 1000, "an activity record")
            record = msgspec.json.decode(raw)
        except (OSError, SessionError, msgspec.DecodeError):
            return {}
        return record if isinstance(record, dict) else {}  # pyright: ignore[reportUnknownVariableType]

    @property
    def activity_path(self) -> Path:
        """``activity``: when the user last prompted or commanded (:func:`record_activity`)."""
        return self.path / "activity"

    @property
    def metadata_path(self) -> Path:
        """``session.json``."""
        return self.path / "session.json"

    @property
    def storage_dir(self) -> Path:
        """The harness's JSONL storage folder."""
        return self.path / "storage"

    @property
    def lock_path(self) -> Path:
        """The lock a running worker holds."""
        return self.path / "worker.lock"

    @property
    def log_path(self) -> Path:
        """Where the worker's stderr goes when a supervisor starts it."""
        return self.path / "worker.log"

    @property
    def socket_path(self) -> Path:
        """The worker's Unix socket: ``worker.sock`` in the folder, or a short stand-in."""
        preferred = self.path / "worker.sock"
        if len(os.fsencode(preferred)) <= SOCKET_PATH_LIMIT:
            return preferred
        digest = hashlib.sha256(os.fsencode(self.path.resolve())).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"coding-agent-{os.getuid()}" / f"{digest}.sock"

    def worker_running(self) -> bool:
        """True while some process holds :attr:`lock_path` (a worker serves the session)."""
        try:  # O_NONBLOCK: a FIFO in its place must not hang the listing
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                return True
            raise
        finally:
            os.close(fd)
        return False


METADATA_LIMIT = 1024 * 1024
"""The most bytes a ``session.json`` may hold (it holds a few hundred)."""

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_FIX = "move it away, or delete the session folder"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of ``path`` if it is a regular file (after symlinks), else
    :class:`SessionError` naming it and what it is. Opened with ``O_NONBLOCK``, so a FIFO does
    not block the open, and checked with ``fstat`` before a byte is read (a FIFO, a device such
    as ``/dev/zero``, a socket never is). ``OSError`` (missing, unreadable) is the caller's."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise SessionError(
                f"{path}: not a regular file but {kind}: refusing to read it ({_FIX})"
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of regular file ``path`` (:func:`open_regular`), refusing one of more than
    ``limit`` bytes with a :class:`SessionError` naming it (``what`` names the kind of file:
    ``"a session.json"``)."""
    fd = open_regular(path)
    chunks: list[bytes] = []
    total = size = 0
    try:
        size = os.fstat(fd).st_size
        while size <= limit and total <= limit:  # a file growing as it is read stops too
            chunk = os.read(fd, limit + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if size > limit or total > limit:
        raise SessionError(
            f"{path}: {max(size, total)} bytes, more than {what} holds (at most {limit}): "
            f"refusing to read it ({_FIX})"
        )
    return b"".join(chunks)


def check_writable(session: Session) -> None:
    """Raise :class:`SessionError` naming the first of the session folder, its storage folder
    and its ``main.jsonl`` that this process cannot write (a read-only mount, a folder or file
    without write permission): every command that runs the session writes there, and finding
    out at the first commit would end in a traceback."""
    storage = session.storage_dir
    for path in (session.path, storage, storage / "main.jsonl"):
        if path.exists() and not os.access(path, os.W_OK):
            raise SessionError(
                f"{path}: cannot write to the session (read-only): it records every change "
                "there; make it writable again (chmod u+w, or mount it read-write), or start a "
                "new session"
            )


def _new_id(now: datetime) -> str:
    return f"{now.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def create_session(
    cwd: str | os.PathLike[str],
    *,
    model: str | None = None,
    settings: LaunchSettings | None = None,
    env: Mapping[str, str] | None = None,
    session_id: str | None = None,
) -> Session:
    """Create a new session folder for project folder ``cwd`` (made absolute), named
    ``session_id`` when given (``--session-id``: a UUID, checked by the caller; one that exists
    already is a :class:`SessionError`, and nothing is made), else a new id.

    The folder is assembled under a hidden name and renamed into place once ``session.json``
    is written, so a crash half-way never leaves a folder without metadata."""
    project = Path(cwd).expanduser().resolve()
    if not project.is_dir():
        raise SessionError(f"{project}: the project folder does not exist")
    if settings is not None and model is None:
        model = settings.model
    try:
        root = private_tree(state_home(env), sessions_root(env))  # 0700, whatever the umask
    except PrivacyError as error:
        raise SessionError(str(error)) from None
    now = datetime.now(UTC)
    chosen = session_id
    while True:
        session_id = chosen or _new_id(now)
        path = root / session_id
        if chosen and os.path.lexists(path):
            raise SessionError(
                f"session {chosen} already exists (continue it with --resume {chosen}, or "
                "give a new id: uuidgen)"
            )
        if path.exists():  # pragma: no cover - 24 random bits collided in one second
            continue
        metadata = SessionMetadata(
            version=METADATA_VERSION,
            id=session_id,
            cwd=str(project),
            created=now.isoformat(timespec="seconds"),
            model=model,
            settings=settings,
        )
        if _place_session(root, path, metadata):
            break
        if chosen:  # made meanwhile by another run with the same id: the check above says so
            continue
    return Session(path, metadata)


def _place_session(root: Path, path: Path, metadata: SessionMetadata) -> bool:
    """Assemble a session folder for ``metadata`` (``session.json`` and ``storage/`` with an
    empty ``main.jsonl``) under a hidden name in ``root`` and rename it to ``path``; False,
    with nothing left behind, when ``path`` appeared meanwhile."""
    staging = Path(tempfile.mkdtemp(prefix=f".{metadata.id}.", dir=root))
    private_dir(staging / "storage")
    # The transcript exists from the start: a worker never creates one, so a missing
    # main.jsonl is an error naming it, not an empty session (pico3's JsonlStorage create).
    os.close(os.open(staging / "storage" / "main.jsonl", os.O_WRONLY | os.O_CREAT, PRIVATE_FILE))
    _write_atomically(staging / "session.json", _encode(metadata))
    try:
        staging.rename(path)
    except OSError:  # the same id appeared meanwhile (a racing adopter, or a collision)
        shutil.rmtree(staging, ignore_errors=True)
        return False
    return True


def adopt_session(metadata: SessionMetadata, *, env: Mapping[str, str] | None = None) -> Session:
    """Make the folder of a session created elsewhere (another ``coding-agent serve`` on the
    same PostgreSQL database) from its ``metadata``: ``session.json`` and an empty
    ``storage/``, assembled under a hidden name and renamed into place. A folder that is there
    already (a racing adopter) is used as it is."""
    if not metadata.id or "/" in metadata.id or metadata.id.startswith("."):
        raise SessionError(f"invalid session id {metadata.id!r}")
    try:
        root = private_tree(state_home(env), sessions_root(env))
    except PrivacyError as error:
        raise SessionError(str(error)) from None
    path = root / metadata.id
    if not path.exists():
        _place_session(root, path, metadata)  # False: another adopter was first
    return load_session(path)


def _encode(metadata: SessionMetadata) -> bytes:
    return msgspec.json.format(msgspec.json.encode(metadata))


def update_settings(session: Session, settings: LaunchSettings) -> Session:
    """Store ``settings`` as the session's launch settings (atomically); the updated session.

    The metadata is read again first, so a concurrent writer's other fields are kept."""
    current = load_session(session.path)
    if current.metadata.settings == settings and current.metadata.model == settings.model:
        return current
    metadata = msgspec.structs.replace(current.metadata, settings=settings, model=settings.model)
    _write_atomically(current.metadata_path, _encode(metadata))
    return Session(current.path, metadata)


def remove_session(session: Session) -> None:
    """Delete a session folder (a start that failed before anything was stored: no ghost)."""
    shutil.rmtree(session.path, ignore_errors=True)


def _write_atomically(path: Path, data: bytes) -> None:
    write_atomic(path, data + b"\n", mode=PRIVATE_FILE)


def load_session(path: str | os.PathLike[str]) -> Session:
    """Read the session in folder ``path`` (raises :class:`SessionError` naming what is wrong)."""
    folder = Path(path).expanduser().absolute()
    metadata_path = folder / "session.json"
    try:
        raw = read_regular(metadata_path, METADATA_LIMIT, "a session.json")
    except FileNotFoundError:
        raise SessionError(f"{folder}: not a session folder (no session.json)") from None
    except OSError as error:
        raise SessionError(f"{metadata_path}: cannot read: {error.strerror}") from None
    try:
        metadata = msgspec.json.decode(raw, type=SessionMetadata)
    except msgspec.DecodeError as error:
        raise SessionError(
            f"{metadata_path}: invalid session metadata: {error} "
            "(the file was left as it is: fix it, or move the folder away)"
        ) from None
    if metadata.version != METADATA_VERSION:
        raise SessionError(
            f"{metadata_path}: unsupported session version {metadata.version} "
            f"(this coding-agent reads version {METADATA_VERSION})"
        )
    if metadata.id != folder.name:
        raise SessionError(
            f"{metadata_path}: id {metadata.id!r} does not match the folder name {folder.name!r}"
        )
    return Session(folder, metadata)


_TAIL_BYTES = 256 * 1024
_TIMESTAMP = re.compile(rb'"timestamp":(\d{10,16})[,}]')


def _newest_message_time(log: Path) -> float | None:
    """The newest message ``timestamp`` (milliseconds) in the tail of a storage log, as POSIX
    seconds; ``None`` when there is none or the file cannot be read."""
    try:
        with open(open_regular(log), "rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - _TAIL_BYTES))
            tail = file.read()
    except (OSError, SessionError):
        return None
    stamps = [int(found) for found in _TIMESTAMP.findall(tail)]
    return max(stamps) / 1000 if stamps else None


def record_activity(
    session: Session,
    when: datetime | None = None,
    *,
    branch: int | None = None,
    fsync: bool = True,
) -> None:
    """Record that the user prompted or commanded in ``session`` at ``when`` (default: now),
    on conversation ``branch`` (``None``: the one recorded before): what ``--continue`` and the
    session lists order by, and what ``export`` exports (see the module docstring)."""
    moment = (when or datetime.now(UTC)).astimezone(UTC)
    record = {
        "at": moment.isoformat(timespec="microseconds"),
        "branch": branch if branch is not None else session.current_branch(),
    }
    write_atomic(
        session.activity_path, msgspec.json.encode(record) + b"\n", mode=PRIVATE_FILE, fsync=fsync
    )


def list_sessions(
    cwd: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    on_broken: Callable[[SessionError], None] | None = None,
) -> list[Session]:
    """Every readable session, most recently active first (:meth:`Session.last_active`: the
    user's last prompt or command, then the id); with ``cwd``, only that project's sessions.

    A folder whose ``session.json`` is missing or broken is not a session anyone can open: it
    is left untouched, and reported to ``on_broken`` (the command line prints a warning naming
    the file) instead of being skipped without a word. Hidden folders (a session being
    created) are not looked at.
    """
    root = sessions_root(env)
    project = str(Path(cwd).expanduser().resolve()) if cwd is not None else None
    try:
        folders = [entry for entry in root.iterdir() if entry.is_dir()]
    except FileNotFoundError:
        return []
    found: list[Session] = []
    for folder in folders:
        if folder.name.startswith("."):
            continue
        try:
            session = load_session(folder)
        except SessionError as error:
            if on_broken is not None:
                on_broken(error)
            continue
        if project is None or session.metadata.cwd == project:
            found.append(session)
    active = {session.id: session.last_active() for session in found}
    found.sort(key=lambda session: (active[session.id], session.id), reverse=True)
    return found


def latest_session(
    cwd: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    on_broken: Callable[[SessionError], None] | None = None,
) -> Session | None:
    """The session the user prompted (or commanded) last (of project ``cwd`` when given), what
    ``--continue`` opens; ``None`` when there is none.

    A session opened and left without a prompt lists by its creation time, so it can be the
    newest; it is passed over here (``--continue`` is "the session you prompted last", as in
    Claude Code and pi, which keep no such session) unless no session was ever used."""
    sessions = list_sessions(cwd, env=env, on_broken=on_broken)
    used = next((session for session in sessions if session.used()), None)
    return used if used is not None else (sessions[0] if sessions else None)


def open_session(id_or_prefix: str, *, env: Mapping[str, str] | None = None) -> Session:
    """The session whose id is ``id_or_prefix``, or the only one starting with it."""
    if not id_or_prefix or "/" in id_or_prefix or id_or_prefix in (".", ".."):
        raise SessionError(f"invalid session id {id_or_prefix!r}")
    root = sessions_root(env)
    exact = root / id_or_prefix
    if not os.path.lexists(exact / "session.json"):  # a UUID as macOS uuidgen spells it
        exact = root / id_or_prefix.lower()
    if os.path.lexists(exact / "session.json"):  # whatever it is: load_session names a bad one
        return load_session(exact)
    matches = [s for s in list_sessions(env=env) if s.id.startswith(id_or_prefix)]
    if not matches:
        raise SessionError(f"no session {id_or_prefix!r} in {root}")
    if len(matches) > 1:
        ids = ", ".join(s.id for s in matches[:5])
        raise SessionError(f"session id {id_or_prefix!r} is ambiguous: {ids}")
    return matches[0]
