"""``coding-agent db migrate URL``: the explicit migration step of the sessions' PostgreSQL schema.

Brings the pico3 schema of the database at ``URL`` (``postgresql://…``) to this release's
version (:func:`pico3.migrate_database`): under an advisory lock (safe beside running servers
and a second ``db migrate``), every lock wait bounded by ``--lock-timeout`` (nothing changes if
one is not granted in time). Run it with a role that may change the schema, before upgrading the
servers of a failover pair one at a time (docs/postgresql.md, "Schema changes and rolling
upgrades"). One line on stdout on success; one line on stderr and exit status 5 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["EXIT_STORAGE", "add_db_commands", "run_db_command"]

EXIT_STORAGE = 5
"""The exit status of a database that cannot be reached or migrated (as the worker's)."""


def add_db_commands(commands: Any) -> None:
    """Add ``db migrate`` to the CLI's subparsers."""
    db = commands.add_parser(
        "db",
        help="the sessions' PostgreSQL database: migrate its schema",
        description="Operations on the PostgreSQL database of `serve --storage postgresql://…`.",
    )
    actions = db.add_subparsers(dest="db_command", metavar="{migrate}")
    actions.required = True
    migrate = actions.add_parser(
        "migrate",
        help="bring the database's schema to this release's version",
        description="Migrate the pico3 schema of the database at URL to this release's version "
        "(safe while servers use it; nothing changes if a lock is not granted in time).",
    )
    migrate.add_argument("url", metavar="URL", help="postgresql://USER@HOST[:PORT]/DATABASE")
    migrate.add_argument(
        "--lock-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="give up (changing nothing) when a lock is not granted within this (default 10)",
    )


def run_db_command(args: argparse.Namespace) -> int:
    """Run ``db migrate``; returns the exit status (0, or 5 with one line on stderr)."""
    import anyio

    from pico3 import StorageError, migrate_database

    if not str(args.url).startswith(("postgresql://", "postgres://")):
        print(
            f"coding-agent db migrate: {args.url!r} is not a postgresql://… URL",
            file=sys.stderr,
        )
        return 2
    try:
        found, now = anyio.run(lambda: migrate_database(args.url, lock_timeout=args.lock_timeout))
    except StorageError as error:
        print(f"coding-agent db migrate: {error}", file=sys.stderr)
        return EXIT_STORAGE
    if found == now:
        print(f"coding-agent db migrate: the pico3 schema is at version {now}; nothing to do")
    else:
        print(f"coding-agent db migrate: migrated the pico3 schema from version {found} to {now}")
    return 0
