"""``coding-agent import``: continue a conversation of pi or Claude Code here.

::

    coding-agent import PATH [--cwd FOLDER]     a session file of either agent → a new session
    coding-agent import --list                  this folder's importable sessions, newest first
    coding-agent import --latest [--cwd FOLDER] the newest of them

The new session is made in the project folder the file records (``--latest``: this folder,
whose sessions it lists; ``--cwd`` picks another, for a folder that moved); the command prints its id and the command that continues it
(``coding-agent --resume ID``), and what was left out (skipped lines of a cut-off file, a
line over 64 MB by its number, subagents' lines). The source file is only read. Importing a file a second time makes another
session and says which ones hold the first import.

Everything printed is made inert (:func:`chord.inert`): the first prompt, the session id, the
model and a format version come from a file someone else may have written, and an ESC in them
(a window title, an OSC 52 clipboard write, concealed text) shows as its escape.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_import_command", "run_import_command"]


def add_import_command(commands: Any) -> None:
    """Add ``import`` to the CLI's subparsers."""
    command = commands.add_parser(
        "import",
        help="continue a pi or Claude Code session here",
        description="Import a session file of pi (~/.pi/agent/sessions/…) or Claude Code "
        "(~/.claude/projects/…) as a new session of this agent.",
    )
    command.add_argument("path", metavar="PATH", nargs="?", help="the session's .jsonl file")
    command.add_argument(
        "--list",
        dest="list_",
        action="store_true",
        help="list this folder's sessions of pi and Claude Code, newest first",
    )
    command.add_argument("--latest", action="store_true", help="import the newest of them")
    command.add_argument(
        "--cwd",
        dest="import_cwd",
        metavar="FOLDER",
        help="the project folder of the new session (default: the one the file records)",
    )


def run_import_command(
    args: argparse.Namespace, cwd: Path, resume: str, stream: TextIO | None = None
) -> int:
    """Run ``import``; returns the exit status (2 for a file that cannot be imported).
    ``resume`` is how the user starts the agent (``coding-agent``, ``uv run coding-agent``)."""
    out: TextIO = stream if stream is not None else sys.stdout
    # lazy: start-up time (every command line builds this parser; these load only for import)
    from chord import inert
    from coding_agent.importing.common import ImportProblem
    from coding_agent.importing.store import (
        import_file,
        import_report,
        importable_sessions,
        previous_imports,
        read_session_file,
    )

    chosen = sum(bool(x) for x in (args.path, args.list_, args.latest))
    if chosen != 1:
        print(
            "coding-agent: error: import takes one of PATH, --list or --latest "
            "(coding-agent import --list shows what can be imported here)",
            file=sys.stderr,
        )
        return 2
    try:
        if args.list_:
            found = importable_sessions(cwd)
            if not found:
                out.write(f"No pi or Claude Code sessions of {cwd}\n")
                return 0
            for item in found:
                out.write(inert(item.listing()) + "\n")
            return 0
        if args.latest:
            found = importable_sessions(cwd)
            if not found:
                raise ImportProblem(
                    f"no pi or Claude Code session of {cwd} to import "
                    "(coding-agent import PATH takes a file from anywhere)"
                )
            path = found[0].path
        else:
            path = Path(args.path)
        imported = read_session_file(path)
        folder = Path(args.import_cwd).expanduser().resolve() if args.import_cwd else None
        if folder is None and args.latest:  # listed for this folder: continued in it
            folder = cwd
        earlier = previous_imports(imported.source)
        session = import_file(imported, cwd=folder)
    except ImportProblem as problem:
        print(f"coding-agent: error: {inert(str(problem))}", file=sys.stderr)
        return 2
    for line in import_report(imported, session, earlier):
        out.write(inert(line) + "\n")
    out.write(f"Continue it with: {resume} --resume {session.id}\n")
    return 0
