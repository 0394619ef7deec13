"""The ``coding-agent serve`` command line (docs/server.md).

::

    coding-agent serve [--socket PATH] [--storage postgresql://…|DIR] [--idle SECONDS]
        [--cwd DIR] [--listen tcp://HOST:PORT --tls-cert FILE --tls-key FILE --token-file FILE]
        [--insecure]

Once it listens it prints one ``LISTENING <address>`` line per listener on stdout (the bound
port when ``:0`` was asked); lifecycle events go to stderr as ``coding-agent serve: …`` lines.
SIGTERM or SIGINT stops it and every worker it started.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from coding_agent.server.remote import TOKEN_ENV
from coding_agent.server.serve import (
    ServerOptions,
    ServerSetupError,
    SessionServer,
    default_socket_path,
    is_loopback,
    parse_listen,
    prepare_socket_folder,
    read_token_file,
    server_tls_context,
)
from coding_agent.settings.secret_env import hide_secrets_from_proc

__all__ = ["run_serve"]

_POSTGRES = ("postgresql://", "postgres://")


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
    token: bytes | None = None
    if args.listen:
        host, port = parse_listen(args.listen)
        if args.token_file is None:
            raise ServerSetupError(
                f"--listen {args.listen} needs --token-file FILE: TCP clients must present its "
                "token (make one: python3 -c 'import secrets; print(secrets.token_urlsafe(32))' "
                "> FILE; chmod 600 FILE)"
            )
        token = read_token_file(args.token_file)
        if args.tls_cert and args.tls_key:
            if args.insecure:
                raise ServerSetupError("--insecure and --tls-cert contradict each other: drop one")
            run["tls"] = server_tls_context(args.tls_cert, args.tls_key)
        elif args.tls_cert or args.tls_key:
            raise ServerSetupError("TLS needs both --tls-cert FILE and --tls-key FILE")
        elif not args.insecure:
            raise ServerSetupError(
                f"--listen {args.listen} needs TLS: give --tls-cert FILE and --tls-key FILE "
                "(or, on a loopback address only, --insecure for plain TCP)"
            )
        elif not is_loopback(host):
            raise ServerSetupError(
                f"--insecure is only allowed on a loopback address, not {host}: give "
                "--tls-cert FILE and --tls-key FILE"
            )
        run["tcp"] = (host, port)
    elif args.tls_cert or args.tls_key or args.token_file or args.insecure:
        raise ServerSetupError(
            "--tls-cert, --tls-key, --token-file and --insecure are for --listen tcp://HOST:PORT"
        )
    options = ServerOptions(
        cwd=project,
        env=env,
        storage=storage,
        idle=args.idle,
        lease=args.lease or None,
        faux_script=Path(args.faux_script) if args.faux_script else None,
        token=token,
        on_event=lambda line: print(f"coding-agent serve: {line}", file=sys.stderr, flush=True),
    )
    return options, run


def run_serve(args: argparse.Namespace, cwd: Path) -> int:
    """Run the server until SIGTERM/SIGINT; returns the exit status (2: a setup error, one
    ``coding-agent: error:`` line naming the flag and the fix)."""
    try:
        options, run = _options(args, cwd)
        prepare_socket_folder(run["socket_path"], options.env)  # before anything listens
    except ServerSetupError as error:
        print(f"coding-agent: error: {error}", file=sys.stderr)
        return 2
    server = SessionServer(options)

    hide_secrets_from_proc(options.cwd)  # its workers' commands may read /proc/<pid>/environ

    def ready(addresses: list[str]) -> None:
        for address in addresses:
            sys.stdout.write(f"LISTENING {address}\n")
        sys.stdout.flush()

    async def main() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as group:

                async def stop() -> None:
                    async for _ in signals:
                        group.cancel_scope.cancel()
                        return

                group.start_soon(stop)
                await server.run(ready=ready, **run)

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
    return 0
