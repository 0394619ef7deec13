"""The ``coding-agent serve`` command line (docs/server.md).

::

    coding-agent serve [--socket PATH] [--storage postgresql://…|DIR] [--idle SECONDS]
        [--cwd DIR] [--listen tcp://HOST:PORT --tls-cert FILE --tls-key FILE --token-file FILE]
        [--insecure] [--migrate] [--max-connections N] [--max-pending N] [--max-per-address N]
        [--max-sessions N] [--max-starting N] [--host-sessions [N]] [--db-connections N]
        [--db-pool-size N]

On PostgreSQL its sessions run in host processes by default (one per core) and its connections
to the database are at most ``--db-connections`` (default 20) whatever the number of sessions
(:func:`plan_sessions`); ``--host-sessions 0`` runs a worker process per session, the default on JSONL.

At start it raises its open-file limit to the hard limit (where it may), with ``--migrate``
migrates the database's schema, and prints one ``LISTENING <address>`` line per listener on
stdout (the bound port when ``:0`` was asked); its log goes to stderr as ``coding-agent serve:
<time> <event> key=value…: message`` lines (:mod:`.events`). SIGHUP reads the token file and
the certificate again; SIGTERM or SIGINT stops it and every worker it started (a ``stopped``
log line; exit status 0 after SIGTERM, 130 after SIGINT, as Ctrl+C ends any command).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from coding_agent.server.addresses import (
    default_socket_path,
    is_loopback,
    parse_listen,
    prepare_socket_folder,
)
from coding_agent.server.admission import default_limits, raise_fd_limit
from coding_agent.server.args import DEFAULT_DB_CONNECTIONS, HOST_SESSIONS_CORES
from coding_agent.server.credentials import Credentials, ServerSetupError
from coding_agent.server.events import format_line
from coding_agent.server.remote import TOKEN_ENV
from coding_agent.server.serve import ServerOptions, SessionServer
from coding_agent.server.session_host import HOST_MAX_STARTING
from coding_agent.settings.secret_env import hide_secrets_from_proc

__all__ = ["plan_sessions", "run_serve"]

_POSTGRES = ("postgresql://", "postgres://")
DIRECTORY_CONNECTIONS = 1
"""The server's own PostgreSQL connection: its session directory (:mod:`.directory`)."""
MIN_DEFAULT_POOL = 4
"""The fewest pool connections a host gets when ``serve`` picks the number of hosts: a host's
two groups in flight and a session opening each need one, so on many cores the bound makes
fewer, better-served hosts rather than one per core on a pool of one."""
WORKER_CONNECTIONS = 3
"""A worker process's PostgreSQL connections at most: its writer, its lease renewer, its blobs."""
EXIT_STORAGE = 5
"""``--migrate`` could not migrate: the status of ``coding-agent db migrate`` and the worker."""


def _options(args: argparse.Namespace, cwd: Path) -> tuple[ServerOptions, dict[str, Any]]:
    env = dict(os.environ)
    env.pop(TOKEN_ENV, None)  # a client's token: no worker (nor what it runs) needs it
    storage: str | None = None
    if args.storage:
        if args.storage.startswith(_POSTGRES):
            storage = args.storage
        else:
            folder = Path(args.storage).expanduser().absolute()
            try:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as error:
                raise ServerSetupError(f"--storage {folder}: {error}") from None
            if not folder.is_dir():
                raise ServerSetupError(f"--storage {folder}: not a folder")
            env["XDG_STATE_HOME"] = str(folder)
    project = Path(args.cwd).expanduser().absolute() if args.cwd else cwd
    if not project.is_dir():
        raise ServerSetupError(f"--cwd {project}: not a folder")
    run: dict[str, Any] = {
        "socket_path": Path(args.socket).absolute() if args.socket else default_socket_path(env)
    }
    credentials = Credentials()
    web = getattr(args, "web", None)  # the page's listener: the rules of --listen apply to it
    listens = [(flag, url) for flag, url in (("--listen", args.listen), ("--web", web)) if url]
    if listens:
        listen = " ".join(f"{flag} {url}" for flag, url in listens)
        hosts = [parse_listen(url)[0] for _, url in listens]
        host = next((h for h in hosts if not is_loopback(h)), hosts[0])
        if web:
            run["web"] = parse_listen(web)
        if args.token_file is None:
            raise ServerSetupError(
                f"{listen} needs --token-file FILE: TCP clients must present its "
                "token (make one: python3 -c 'import secrets; print(secrets.token_urlsafe(32))' "
                "> FILE; chmod 600 FILE)"
            )
        if args.tls_cert and args.tls_key:
            if args.insecure:
                raise ServerSetupError("--insecure and --tls-cert contradict each other: drop one")
            credentials = Credentials.load(args.token_file, args.tls_cert, args.tls_key)
        elif args.tls_cert or args.tls_key:
            raise ServerSetupError("TLS needs both --tls-cert FILE and --tls-key FILE")
        elif not args.insecure:
            raise ServerSetupError(
                f"{listen} needs TLS: give --tls-cert FILE and --tls-key FILE "
                "(or, on a loopback address only, --insecure for plain TCP)"
            )
        elif not is_loopback(host):
            raise ServerSetupError(
                f"--insecure is only allowed on a loopback address, not {host}: give "
                "--tls-cert FILE and --tls-key FILE"
            )
        else:
            credentials = Credentials.load(args.token_file)
        if args.listen:
            run["tcp"] = parse_listen(args.listen)
    elif args.tls_cert or args.tls_key or args.token_file or args.insecure:
        raise ServerSetupError(
            "--tls-cert, --tls-key, --token-file and --insecure are for --listen tcp://HOST:PORT "
            "(or --web tcp://HOST:PORT)"
        )
    options = ServerOptions(
        cwd=project,
        env=env,
        storage=storage,
        idle=args.idle,
        lease=args.lease or None,
        faux_script=Path(args.faux_script) if args.faux_script else None,
        credentials=credentials,
        limits=default_limits(
            resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            max_pending=args.max_pending,
            max_per_address=args.max_per_address,
            max_connections=args.max_connections,
        ),
        on_event=_print,
        max_sessions=args.max_sessions,
        wait_for_approval=getattr(args, "wait_for_approval", None),
    )
    hosts, pool, options.max_sessions, connections = plan_sessions(args, storage)
    if args.max_starting is not None:
        options.max_starting = args.max_starting
    elif hosts:
        options.max_starting = HOST_MAX_STARTING  # a hosted start is far cheaper than a worker's
    options.host_sessions = hosts
    if pool is not None:
        options.db_pool_size = pool
    options.db_connections = connections
    return options, run


def _cores() -> int:
    """The CPUs this process may run on (``os.process_cpu_count``, Python 3.13+)."""
    count: Callable[[], int | None] = getattr(os, "process_cpu_count", os.cpu_count)
    return max(1, count() or 1)


def plan_sessions(
    args: argparse.Namespace, storage: str | None, cores: int | None = None
) -> tuple[int, int | None, int | None, int | None]:
    """How the sessions run, from ``--host-sessions``, ``--db-connections``, ``--db-pool-size``
    and ``--max-sessions``: ``(host processes (0: a worker process each), each host's pool size,
    --max-sessions, the PostgreSQL connections the server holds at most)``.

    On PostgreSQL the server's connections are bounded by ``--db-connections`` whatever the
    number of sessions: one for the session directory, then ``P + 1`` per host (its pool and its
    lease renewer), or 3 per worker process (which bounds ``--max-sessions``). A combination
    over the bound is refused with one line naming the numbers and the fix. ``cores``: the
    CPUs to count on (default: this process's)."""
    cores = cores or _cores()
    hosts: int | None = args.host_sessions
    if hosts == HOST_SESSIONS_CORES:
        hosts = cores
    if storage is None:  # JSONL: no connections to bound
        for flag in ("--db-connections", "--db-pool-size"):
            if getattr(args, flag[2:].replace("-", "_")) is not None:
                raise ServerSetupError(
                    f"{flag} is for --storage postgresql://… (JSONL sessions hold no database "
                    "connections)"
                )
        return hosts or 0, None, args.max_sessions, None
    bound: int = args.db_connections or DEFAULT_DB_CONNECTIONS
    budget = bound - DIRECTORY_CONNECTIONS
    pool: int | None = args.db_pool_size
    if hosts == 0:  # a worker process per session, each with connections of its own
        if pool is not None:
            raise ServerSetupError(
                "--db-pool-size is for host processes: with --host-sessions 0 every worker "
                f"holds its own {WORKER_CONNECTIONS} connections (bound them with "
                "--db-connections, or drop --host-sessions 0)"
            )
        fits = budget // WORKER_CONNECTIONS
        wanted = args.max_sessions or max(fits, 1)
        need = wanted * WORKER_CONNECTIONS + DIRECTORY_CONNECTIONS
        if need > bound:
            given = f"--max-sessions {wanted}" if args.max_sessions else "one worker"
            raise ServerSetupError(
                f"{given} × {WORKER_CONNECTIONS} connections + 1 for the session directory = "
                f"{need} PostgreSQL connections, over --db-connections {bound}: "
                + (f"give --max-sessions {fits} or " if fits else "give ")
                + f"--db-connections {need} (or drop --host-sessions 0: host processes share "
                "connections)"
            )
        return 0, None, wanted, need
    named = f"--host-sessions {hosts}"
    if hosts is None:  # the default: one host per core, as many as the bound allows
        hosts = max(1, min(cores, budget // ((pool or MIN_DEFAULT_POOL) + 1)))
        named = f"{hosts} host process{'es' if hosts > 1 else ''}"
    if pool is None:
        pool = max(1, budget // hosts - 1)
    need = hosts * (pool + 1) + DIRECTORY_CONNECTIONS
    if need > bound:
        if budget // hosts >= 2:
            fix = f"lower --db-pool-size to {budget // hosts - 1}, or "
        elif budget >= 2:
            fix = f"give --host-sessions {budget // 2} or fewer, or "
        else:
            fix = ""
        raise ServerSetupError(
            f"{named} × (--db-pool-size {pool} + 1 lease renewer) + 1 for the session "
            f"directory = {need} PostgreSQL connections, over --db-connections {bound}: "
            f"{fix}give --db-connections {need}"
        )
    return hosts, pool, args.max_sessions, need


def _print(line: str) -> None:
    print(f"coding-agent serve: {line}", file=sys.stderr, flush=True)


def _migrate(url: str) -> int | None:
    """``--migrate``: the schema brought to this release's (one log line); the exit status
    (5, one line) when it cannot be."""
    from pico3 import StorageError, migrate_database

    try:
        found, now = anyio.run(migrate_database, url)
    except StorageError as error:
        _print(format_line("migration", str(error), ok="no"))
        print(f"coding-agent: error: --migrate: {error}", file=sys.stderr)
        return EXIT_STORAGE
    message = "nothing to do" if found == now else "migrated"
    _print(format_line("migration", message, ok="yes", found=found, now=now))
    return None


def run_serve(args: argparse.Namespace, cwd: Path) -> int:
    """Run the server until SIGTERM/SIGINT; returns the exit status (2: a setup error, one
    ``coding-agent: error:`` line naming the flag and the fix)."""
    before, now = raise_fd_limit()  # before the caps are derived from it
    try:
        options, run = _options(args, cwd)
        prepare_socket_folder(run["socket_path"], options.env)  # before anything listens
        if args.migrate and options.storage is None:
            raise ServerSetupError("--migrate is for --storage postgresql://…")
    except ServerSetupError as error:
        print(f"coding-agent: error: {error}", file=sys.stderr)
        return 2
    server = SessionServer(options)
    limits = server.limits
    server.log(
        "limits", "the open-file limit and the connection caps in force", fd_limit=now,
        raised_from=before if before != now else None, max_connections=limits.max_connections,
        max_pending=limits.max_pending, max_per_address=limits.max_per_address,
        max_sessions=options.max_sessions, max_starting=options.max_starting,
        host_sessions=options.host_sessions,
        db_pool_size=options.db_pool_size if options.host_sessions and options.storage else None,
        db_connections=options.db_connections,
    )  # fmt: skip
    if args.migrate and options.storage is not None:
        failed = _migrate(options.storage)
        if failed is not None:
            return failed

    hide_secrets_from_proc(options.cwd)  # its workers' commands may read /proc/<pid>/environ

    def ready(addresses: list[str]) -> None:
        for address in addresses:
            sys.stdout.write(f"LISTENING {address}\n")
        sys.stdout.flush()

    stopped_by: list[signal.Signals] = []

    async def main() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async with anyio.create_task_group() as group:

                async def stop() -> None:
                    async for number in signals:
                        if number == signal.SIGHUP:
                            server.reload()
                            continue
                        stopped_by.append(signal.Signals(number))
                        group.cancel_scope.cancel()
                        return

                group.start_soon(stop)
                web = run.pop("web", None)
                if web is None:
                    await server.run(ready=ready, **run)
                    return
                from coding_agent.server.web import serve_web

                listening: list[str] = []
                started = anyio.Event()

                def ready_too(addresses: list[str]) -> None:
                    listening.extend(addresses)
                    started.set()

                group.start_soon(functools.partial(server.run, ready=ready_too, **run))
                await started.wait()
                tls = server.credentials.tls
                port = await group.start(serve_web, server, *web)
                shown = f"[{web[0]}]" if ":" in web[0] else web[0]
                ready([*listening, f"{'https' if tls else 'http'}://{shown}:{port}/"])

    try:
        try:
            anyio.run(main, backend="asyncio")
        except BaseExceptionGroup as group:  # one error inside the task groups' wrappers
            sole: BaseException = group
            while isinstance(sole, BaseExceptionGroup) and len(sole.exceptions) == 1:
                sole = sole.exceptions[0]
            raise sole from None
    except ServerSetupError as error:  # the socket's folder is not private, say
        print(f"coding-agent: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the address is taken, say
        print(f"coding-agent: error: cannot listen: {error}", file=sys.stderr)
        return 1
    if not stopped_by:
        return 0
    server.log("stopped", "the server and its workers stopped", signal=stopped_by[0].name)
    # Ctrl+C ends it as it ends any command (128 + SIGINT); SIGTERM is the orderly stop
    return 130 if stopped_by[0] == signal.SIGINT else 0
