"""A host process of many sessions: each with its own harness, wire service and lease, all
sharing one interpreter, its imports, and one set of PostgreSQL connections (issue 42).

``coding-agent serve --host-sessions`` starts one of these instead of a worker process per
session (docs/design/server-capacity.md). Each session runs exactly what a worker process runs
(:func:`coding_agent.worker.main.serve`: the session's ``worker.lock``, its facets, its Unix
socket in the session folder, the idle linger), as a task of this process, so the server dials
a hosted session the way it dials a worker. On PostgreSQL the sessions share a
:class:`~coding_agent.worker.database.SharedDatabase`: ``--db-pool-size`` connections for their
commits and blobs, one lease renewer for all their leases, a session's writer connection given
back to the pool while it idles.

What must not be shared between sessions is not: commands run with an explicit ``cwd`` (this
process never changes its own directory, which is the server's project folder; the features
get each session's folder as the ``workspace`` service, their ``os.getcwd()`` fallbacks apply
only without one); each session's configuration reads a copy of the
environment taken at the host's start (the secrets are then withheld from the process's own
``os.environ``, as a worker does, and stay in each session's copy); no session installs a
signal handler (the host's SIGTERM/SIGINT stop every session cleanly). The feature packages
are loaded once and lent to every session (:mod:`coding_agent.worker.shared_features`: the
facets are set up per session, so their state is the session's; ``/reload`` reloads one
session's packages).

The protocol, one JSON object a line (msgspec):

* stdin: ``{"op": "open", "id": ID, "dir": SESSION_DIR}``, ``{"op": "stop", "id": ID}``;
  end of file stops every session, then the host exits;
* stdout: ``{"id": ID, "ready": SOCKET}`` once the session serves, and ``{"id": ID, "exited":
  STATUS, "error": LINE}`` when it ended (the worker's exit codes: 0, 2 usage, 3 busy, 4 model,
  5 storage, 1 a bug; ``error`` is the worker's one line, also appended to the session's log).
  A session that exits before ``ready`` failed to start and left nothing running.

Command line::

    python -m coding_agent.worker.host [--storage URL] [--db-pool-size N] [--lease SECONDS]
        [--linger SECONDS] [--no-fsync]
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec

from chord import FacetGeneration
from coding_agent.session_files.folders import Session, load_session, update_settings
from coding_agent.settings.facets_site import activate as activate_facets_site
from coding_agent.worker.database import DEFAULT_POOL_SIZE, SharedDatabase
from coding_agent.worker.main import (
    WorkerConfig,
    exit_status,
    load_features,
    serve,
    session_worker_config,
)
from coding_agent.worker.shared_features import SharedFeatures
from coding_agent.worker.shared_state import LAUNCH_SETTINGS

__all__ = ["HostReport", "HostRequest", "main"]

_log = logging.getLogger("coding_agent.worker.host")


class HostRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """A line on the host's stdin."""

    op: str
    id: str
    dir: str | None = None


class HostReport(msgspec.Struct, frozen=True, omit_defaults=True):
    """A line on the host's stdout."""

    id: str
    ready: str | None = None
    exited: int | None = None
    error: str | None = None


_REQUEST = msgspec.json.Decoder(HostRequest)
_ENCODE = msgspec.json.Encoder()


class _Hosted:
    def __init__(self) -> None:
        self.stop = anyio.Event()


class SessionHost:
    """The sessions of this process (see the module doc)."""

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        storage: str | None,
        database: SharedDatabase | None,
        linger: float | None,
        lease: float | None,
        fsync: bool,
    ) -> None:
        self._env = dict(env)
        self._storage = storage
        self._database = database
        self._linger = linger
        self._lease = lease
        self._fsync = fsync
        self._sessions: dict[str, _Hosted] = {}
        self.features = SharedFeatures()
        """The feature packages' generations, loaded once and lent to every session."""

    def _say(self, report: HostReport) -> None:
        sys.stdout.buffer.write(_ENCODE.encode(report) + b"\n")
        sys.stdout.flush()

    async def run(self) -> None:
        """Serve the requests on stdin until its end (or SIGTERM/SIGINT); then stop every
        session and return once all ended."""
        async with anyio.create_task_group() as sessions:
            async with anyio.create_task_group() as control:

                async def on_signal() -> None:
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for _ in signals:
                            control.cancel_scope.cancel()
                            return

                control.start_soon(on_signal)
                await self._read_requests(sessions)
                control.cancel_scope.cancel()
            for hosted in self._sessions.values():
                hosted.stop.set()
        self.features.close()

    async def _read_requests(self, sessions: anyio.abc.TaskGroup) -> None:
        fd = sys.stdin.fileno()
        pending = b""
        while True:
            await anyio.wait_readable(fd)
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:  # pragma: no cover - woken without data
                continue
            if not data:
                return
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    self._handle(line, sessions)

    def _handle(self, line: bytes, sessions: anyio.abc.TaskGroup) -> None:
        try:
            request = _REQUEST.decode(line)
        except msgspec.DecodeError as error:
            _log.warning("ignored a request that is not one: %s", error)
            return
        if request.op == "stop":
            hosted = self._sessions.get(request.id)
            if hosted is not None:
                hosted.stop.set()
            return
        if request.op != "open" or request.dir is None:
            _log.warning("ignored an unknown request %r", request.op)
            return
        if request.id in self._sessions:
            self._say(HostReport(request.id, exited=3, error="already hosted here"))
            return
        hosted = self._sessions[request.id] = _Hosted()
        sessions.start_soon(self._session, request.id, Path(request.dir), hosted)

    async def _session(self, sid: str, folder: Path, hosted: _Hosted) -> None:
        status, line = 0, None
        session: Session | None = None
        try:
            session = load_session(folder)
            if self._database is not None:  # launch settings changed on another server
                session = await self._carried_settings(session, self._database)
            config = session_worker_config(
                session,
                linger=self._linger,
                fsync=self._fsync,
                storage=self._storage,
                env=self._env,
                lease=self._lease,
            )
            config = msgspec.structs.replace(config, database=self._database, hosted=True)
            self._withhold(config)

            def ready(socket: Path) -> None:
                self._say(HostReport(sid, ready=str(socket)))
                if self._database is not None:
                    self._database.opened(config.session.id)

            await serve(config, ready=ready, stop=hosted.stop.wait, feature_loader=self._features)
        except Exception as error:
            known = exit_status(error)
            if known is None:
                status, line = 1, f"the session failed: {error!r}"
                _log.error("session %s failed:\n%s", sid, traceback.format_exc())
            else:
                status, line = known
        finally:
            del self._sessions[sid]
            if line is not None and session is not None:
                _append_log(session, line)
            self._say(HostReport(sid, exited=status, error=line))

    def _features(self, config: WorkerConfig) -> list[FacetGeneration]:
        return load_features(config, self.features)

    def _withhold(self, config: WorkerConfig) -> None:
        """Withhold the secrets from the process's own environment (its children inherit
        nothing of them) once their values are read into the session's copy, as a worker does."""
        if config.environment is not None:
            config.environment.withhold_from_process()

    @staticmethod
    async def _carried_settings(session: Session, database: SharedDatabase) -> Session:
        from coding_agent.session_files.folders import LaunchSettings

        try:
            async with database.pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT data FROM pico3_blobs WHERE session = %s AND name = %s",
                    (session.id, LAUNCH_SETTINGS),
                )
                row = await cursor.fetchone()
        except Exception:  # no blob table yet, or unreachable: the storage's open says so
            return session
        if row is None:
            return session
        try:
            settings = msgspec.json.decode(bytes(row[0]), type=LaunchSettings)
        except msgspec.DecodeError:
            return session
        return session if settings == session.settings else update_settings(session, settings)


def _append_log(session: Session, line: str) -> None:
    try:
        fd = os.open(session.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, f"coding-agent worker: {line}\n".encode())
    finally:
        os.close(fd)


def _parser() -> argparse.ArgumentParser:
    from coding_agent.worker.main import _seconds  # pyright: ignore[reportPrivateUsage]

    parser = argparse.ArgumentParser(
        prog="python -m coding_agent.worker.host",
        description="Host many coding-agent sessions in one process (requests on stdin).",
    )
    parser.add_argument("--storage", metavar="URL", help="the sessions' PostgreSQL database")
    parser.add_argument(
        "--db-pool-size",
        type=int,
        default=DEFAULT_POOL_SIZE,
        metavar="N",
        help=f"PostgreSQL connections the sessions commit on (default {DEFAULT_POOL_SIZE}; "
        "plus one renewing every lease)",
    )
    parser.add_argument("--lease", type=_seconds, default=None, metavar="SECONDS")
    parser.add_argument("--linger", type=_seconds, default=None, metavar="SECONDS")
    parser.add_argument("--no-fsync", action="store_true")
    return parser


async def _main(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    options: dict[str, Any] = {
        "env": env,
        "storage": args.storage,
        "linger": args.linger,
        "lease": args.lease or None,
        "fsync": not args.no_fsync,
    }
    if args.storage:
        async with SharedDatabase(args.storage, pool_size=args.db_pool_size) as database:
            await SessionHost(database=database, **options).run()
    else:
        await SessionHost(database=None, **options).run()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.db_pool_size < 1:
        print("coding-agent host: --db-pool-size must be at least 1", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="coding-agent host: %(message)s")
    activate_facets_site()  # the packages `facets add` installed
    env = dict(os.environ)  # every session's configuration reads this copy
    anyio.run(_main, args, env, backend="asyncio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
