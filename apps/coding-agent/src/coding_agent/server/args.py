"""The ``serve`` subcommand's flags. Only ``argparse`` here: ``coding-agent --help`` builds
this parser and must not import the server (anyio, chord, ssl)."""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = [
    "DEFAULT_DB_CONNECTIONS",
    "DEFAULT_IDLE",
    "HOST_SESSIONS_CORES",
    "add_serve_command",
    "add_web_command",
]

DEFAULT_IDLE = 300.0
"""Seconds a worker stays with no client and nothing running before it stops (``--idle``)."""

DEFAULT_DB_CONNECTIONS = 20
"""``serve --db-connections``' default: the server's PostgreSQL connections in all (issue 42:
500 sessions on one server within 20 connections)."""

HOST_SESSIONS_CORES = -1
"""``--host-sessions`` given without ``N``: one host process per core."""


def add_serve_command(commands: Any, seconds: Any) -> None:
    """Add ``serve`` to the command line's subcommands."""
    serve = commands.add_parser(
        "serve",
        help="host many sessions (in host processes on PostgreSQL, a worker process each on "
        "JSONL) for clients over a Unix socket or TCP with TLS and a token",
        description="Host sessions for clients (coding-agent attach, -p/--json --server). "
        "See docs/server.md.",
    )
    serve.add_argument(
        "--listen",
        metavar="tcp://HOST:PORT",
        help="also listen on TCP (needs --tls-cert, --tls-key and --token-file)",
    )
    serve.add_argument(
        "--web",
        metavar="tcp://HOST:PORT",
        help="also serve the web page and its WebSocket there (the same TLS, token file and "
        "--insecure rules as --listen; docs/server.md#the-web-page)",
    )
    serve.add_argument("--tls-cert", metavar="FILE", help="the server's certificate chain (PEM)")
    serve.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="the bearer tokens TCP clients must present, one 'NAME TOKEN' a line (0600; "
        "SIGHUP reads it and the certificate again)",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="plain TCP without TLS, allowed only on a loopback address",
    )
    serve.add_argument(
        "--socket",
        metavar="PATH",
        help="the Unix socket (default: <state>/coding-agent/server/serve.sock)",
    )
    serve.add_argument(
        "--storage",
        metavar="URL|DIR",
        help="postgresql://… keeps the sessions' commits in PostgreSQL; a folder is the state "
        "folder the session folders go in (default: $XDG_STATE_HOME)",
    )
    serve.add_argument(
        "--idle",
        type=seconds,
        default=DEFAULT_IDLE,
        metavar="SECONDS",
        help=f"stop a session's worker after this long with no client and nothing running "
        f"(default {DEFAULT_IDLE:g})",
    )
    serve.add_argument(
        "--lease",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="with --storage postgresql://…: the session lease's expiry, how soon another server "
        "takes over a session whose server died (default 2)",
    )
    serve.add_argument(
        "--cwd", metavar="DIR", help="the project folder new sessions work in (default: here)"
    )
    serve.add_argument(
        "--wait-for-approval",
        nargs="?",
        type=seconds,
        const=math.inf,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help="-p/--json runs on this server that do not say otherwise park their approvals for "
        "an attached client this long (default: until answered), instead of denying at once",
    )
    serve.add_argument(
        "--host-sessions",
        nargs="?",
        type=_whole,
        const=HOST_SESSIONS_CORES,
        default=None,
        metavar="N",
        help="serve every session in N host processes (shared imports; on PostgreSQL one "
        "connection pool and one lease renewer each; N omitted: one per core); 0: a worker "
        "process per session. Default: one host per core on --storage postgresql://… (as many "
        "as --db-connections allows), a worker process per session on JSONL",
    )
    serve.add_argument(
        "--migrate",
        action="store_true",
        help="with --storage postgresql://…: migrate the database's schema before listening "
        "(as `coding-agent db migrate URL`)",
    )
    for flag, what in (
        ("--max-connections", "connected clients in all (default: from the open-file limit)"),
        ("--max-pending", "connections still in their TLS handshake or preface, in all"),
        ("--max-per-address", "connections still in their handshake or preface from one address"),
        (
            "--max-sessions",
            "sessions running at once; a start past it waits for one to end (default: no "
            "bound; with --host-sessions 0 on PostgreSQL, what --db-connections allows at 3 "
            "connections a worker)",
        ),
        (
            "--db-connections",
            f"with --storage postgresql://…: the server's PostgreSQL connections in all, "
            f"whatever the number of sessions (default {DEFAULT_DB_CONNECTIONS}): the session "
            "directory's one, then each host's pool and lease renewer (with --host-sessions 0: "
            "3 a worker, which bounds --max-sessions)",
        ),
        (
            "--db-pool-size",
            "with host processes on --storage postgresql://…: the connections each host's "
            "sessions commit on, whatever their number (plus one renewing every lease; "
            "default: what --db-connections leaves each host)",
        ),
        (
            "--max-starting",
            "sessions starting at once; other starts wait their turn (default: the CPUs, at "
            "least 2, with a worker process per session; 16 with host processes)",
        ),
    ):
        serve.add_argument(flag, type=_positive, default=None, metavar="N", help=what)


def add_web_command(commands: Any) -> None:
    """Add ``web`` (one local session in a browser) to the command line's subcommands."""
    web = commands.add_parser(
        "web",
        help="open a session in a browser: serves it on 127.0.0.1 with a random token and "
        "prints the page's URL",
        description="Serve one session (SESSION, a unique id prefix, or a new one in this "
        "folder) as a web page on 127.0.0.1, with a random token good for this run. "
        "See docs/server.md#the-web-page.",
    )
    web.add_argument("session", nargs="?", metavar="SESSION", help="session id or prefix")
    web.add_argument(
        "--port", type=int, default=0, metavar="PORT", help="the port (default: any free one)"
    )
    web.add_argument("--model", metavar="PROVIDER/ID", default=argparse.SUPPRESS)
    web.add_argument("--faux-script", metavar="FILE", default=argparse.SUPPRESS)


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number (0: a worker process per session)"
        )
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value
