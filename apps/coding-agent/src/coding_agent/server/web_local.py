"""``coding-agent web [SESSION]``: one local session in a browser, on the loopback address.

A :class:`~.serve.SessionServer` of this process's own (its Unix socket in a private temporary
folder, removed at the end) serves that one session, started or reused like ``serve`` does; the
page's listener (:func:`~.web.serve_web`) is on ``127.0.0.1`` with a random token made for this
run, and admits that session only. It prints one line, the page's URL with the token in its
fragment (``#token=…``: a browser never sends a fragment to the server, and the page moves the
token to the tab's storage and out of the address bar), and serves until Ctrl+C; then the worker
it started stops (a worker someone else started, a TUI's, keeps running).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from pathlib import Path

import anyio

from coding_agent.server.remote import TOKEN_ENV
from coding_agent.server.serve import ServerOptions, SessionServer
from coding_agent.server.web import new_token, serve_web
from coding_agent.session_files.folders import (
    LaunchSettings,
    SessionError,
    create_session,
    open_session,
)
from coding_agent.settings.secret_env import hide_secrets_from_proc

__all__ = ["run_web"]


def run_web(args: argparse.Namespace, cwd: Path) -> int:
    """Serve the session until SIGINT/SIGTERM; returns the exit status (2: no such session)."""
    env = dict(os.environ)
    env.pop(TOKEN_ENV, None)
    faux = getattr(args, "faux_script", None)
    try:
        if args.session:
            session = open_session(args.session, env=env)
        else:
            settings = LaunchSettings(model=getattr(args, "model", None), faux_script=faux)
            session = create_session(cwd, settings=settings, env=env)
    except SessionError as error:
        print(f"coding-agent: error: {error}", file=sys.stderr)
        return 2
    token = new_token()
    server = SessionServer(
        ServerOptions(
            cwd=session.cwd,
            env=env,
            faux_script=Path(faux) if faux else None,
            on_event=lambda line: print(f"coding-agent web: {line}", file=sys.stderr, flush=True),
        )
    )
    hide_secrets_from_proc(session.cwd)  # the worker's commands may read /proc/<pid>/environ

    async def main() -> None:
        with (
            tempfile.TemporaryDirectory(prefix="coding-agent-web-") as folder,
            anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals,
        ):
            async with anyio.create_task_group() as group:
                ready = anyio.Event()
                socket_path = Path(folder) / "serve.sock"
                group.start_soon(
                    lambda: server.run(socket_path=socket_path, ready=lambda _: ready.set())
                )
                await ready.wait()
                port = await group.start(
                    lambda task_status: serve_web(
                        server, "127.0.0.1", args.port, tokens=lambda: {"web": token.encode()},
                        only_session=session.id, task_status=task_status,
                    )
                )  # fmt: skip
                print(f"http://127.0.0.1:{port}/#token={token}&session={session.id}", flush=True)
                async for _ in signals:
                    break
                group.cancel_scope.cancel()

    try:
        anyio.run(main, backend="asyncio")
    except OSError as error:  # the port is taken, say
        print(f"coding-agent: error: cannot listen: {error}", file=sys.stderr)
        return 1
    return 0
