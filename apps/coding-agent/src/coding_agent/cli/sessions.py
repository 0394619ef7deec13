"""``coding-agent sessions`` and ``coding-agent export``: sessions for scripts, and exports.

::

    coding-agent sessions [--json] [--all]      this folder's sessions (every folder's: --all),
                                                most recent activity first
    coding-agent export [SESSION] [-o FILE] [--format html|jsonl] [--branch N]

``sessions`` prints one line per session (id, name, last activity, model, size, first prompt),
and under a session with more than one branch a row per branch (its number, as ``/tree`` and
``export --branch N`` take it, and its first prompt; ``*`` marks the branch the user is on);
``--json`` prints a JSON array of :func:`coding_agent.session_files.index.describe` objects instead.
The lines are made inert (:func:`chord.inert`): a name or first prompt from an imported file
(``coding-agent import``) may hold an ESC, which shows as its escape.
A session folder that cannot be read (a ``session.json`` that is broken, a FIFO, a device, too
big) is a warning naming the file on stderr.
``export`` writes a branch of the session (:mod:`coding_agent.session_files.export`) to a file
and prints where (``Exported branch 1 of SESSION as HTML to /abs/SESSION.html``), as pi's
``--export`` does: an HTML page is read in a browser, not in the terminal it would flood. The
file is ``FILE`` (``-o``), by default ``<id>.html`` (``<id>.jsonl``) in the current folder;
``-o -`` writes to stdout instead, for a pipe. The format is ``--format``'s, else ``FILE``'s
extension's (``-o raw.jsonl`` writes JSONL, as ``/export raw.jsonl`` does), else HTML.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_session_commands", "pick_interactively", "run_session_command"]


def add_session_commands(commands: Any) -> None:
    """Add ``sessions`` and ``export`` to the CLI's subparsers."""
    listing = commands.add_parser(
        "sessions",
        help="list sessions (most recent activity first)",
        description="List this folder's sessions, most recent activity first.",
    )
    listing.add_argument("--json", dest="as_json", action="store_true", help="print JSON")
    listing.add_argument("--all", action="store_true", help="every folder's sessions")
    export = commands.add_parser(
        "export",
        help="export a session branch as HTML or JSONL",
        description="Write a self-contained HTML page (or the raw entries as JSONL) of a branch.",
    )
    export.add_argument(
        "session",
        metavar="SESSION",
        nargs="?",
        help="session id or prefix (default: the session of this folder you prompted last, "
        "as --continue picks it)",
    )
    export.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write (default: SESSION_ID.html, or .jsonl, in the current folder; "
        "- for stdout); the path written is printed",
    )
    export.add_argument(
        "--format",
        choices=("html", "jsonl"),
        help="default: FILE's extension (.jsonl: the raw entries), else html",
    )
    export.add_argument(
        "--branch",
        type=int,
        metavar="N",
        help="the branch, as /tree numbers it (default: the branch you are on)",
    )


def run_session_command(args: argparse.Namespace, cwd: Path, stream: TextIO | None = None) -> int:
    """Run ``sessions`` or ``export``; returns the exit status."""
    out: TextIO = stream if stream is not None else sys.stdout
    # lazy: start-up time (every command line builds this parser; these load only for sessions/export)
    from chord import inert
    from coding_agent.session_files.folders import list_sessions, open_session

    if args.command == "sessions":
        # lazy: start-up time (every command line builds this parser; these load only for sessions/export)
        from coding_agent.session_files.index import describe, human_size

        def broken(error: Exception) -> None:  # named, never skipped without a word
            print(f"coding-agent: warning: {error}", file=sys.stderr)

        found = list_sessions(None if args.all else cwd, on_broken=broken)
        infos = [describe(s) for s in found]
        infos.sort(key=lambda info: info["lastActivity"], reverse=True)
        if args.as_json:
            out.write(json.dumps(infos, ensure_ascii=False, indent=2) + "\n")
            return 0
        if not infos:
            out.write(f"No sessions in {cwd}\n" if not args.all else "No sessions\n")
            return 0
        for info in infos:
            fields = [
                info["id"],
                info["lastActivity"],
                info["name"] or "-",
                info["model"] or "-",
                human_size(info["size"]),
                info["firstPrompt"] or "(no prompt yet)",
            ]
            line = "  ".join(fields) + ("  (running)" if info["running"] else "")
            out.write(inert(line) + "\n")
            branches = info["branches"]
            if len(branches) > 1:  # one branch is the session itself: no rows for it
                for branch in branches:
                    mark = "*" if branch["current"] else " "
                    summary = branch["summary"] or "(no prompt yet)"
                    out.write(inert(f"  {mark} branch {branch['id']}  {summary}") + "\n")
        return 0
    # lazy: start-up time (every command line builds this parser; these load only for sessions/export)
    from coding_agent.session_files.export import branch_entries, has_messages, write_export
    from coding_agent.session_files.index import session_name

    if args.session:
        session = open_session(args.session)
    else:  # as --continue: the one prompted last here (pi's and Claude Code's export: the current)
        from coding_agent.session_files.folders import SessionError, latest_session

        latest = latest_session(cwd)
        if latest is None:
            raise SessionError(
                f"no session of {cwd} to export: name one (coding-agent export SESSION; "
                "coding-agent sessions --all lists every folder's)"
            )
        session = latest
    # --branch N is the number users see (/tree's, 1, 2, 3 in creation order); from here on
    # the branch is its conversation id
    chosen, number, entries = branch_entries(session, number=args.branch)
    if not has_messages(entries):
        print(
            f"coding-agent: warning: branch {number} of session {session.id} has no prompt or "
            "answer yet: the export is empty (coding-agent sessions lists its branches; "
            "--branch N picks one)",
            file=sys.stderr,
        )
    args.branch = chosen
    args.format = args.format or _format_of(args.output)
    if args.output == "-":
        # lazy: start-up time (every command line builds this parser; these load only for sessions/export)
        from coding_agent.session_files.export import export_html, export_jsonl

        text = (
            export_jsonl(session, args.branch)
            if args.format == "jsonl"
            else export_html(session, args.branch, name=session_name(session))
        )
        out.write(text)
        return 0
    target = Path(args.output).expanduser() if args.output else Path(f"{session.id}.{args.format}")
    target = target if target.is_absolute() else cwd / target
    written = write_export(
        session, target, format=args.format, branch=args.branch, name=session_name(session)
    )
    out.write(f"Exported branch {number} of {session.id} as {args.format.upper()} to {written}\n")
    return 0


def _format_of(output: str | None) -> str:
    """The export format ``-o FILE`` implies: ``jsonl`` for a ``.jsonl`` file, else ``html``."""
    if output and output != "-" and Path(output).suffix.lower() == ".jsonl":
        return "jsonl"
    return "html"


def pick_interactively(sessions: Any) -> Any:
    """``--resume`` without an id on a terminal: the Textual session picker (filter, Ctrl+D)."""
    # lazy: start-up time (every command line builds this parser; these load only for sessions/export)
    from coding_agent.session_files.folders import SessionError
    from coding_agent.session_files.index import delete_session, describe
    from coding_agent.tui.widgets.session_picker import SessionPickerApp

    by_id = {s.id: s for s in sessions}
    infos = sorted((describe(s) for s in sessions), key=lambda i: i["lastActivity"], reverse=True)

    def delete(session_id: str) -> str | None:
        try:
            delete_session(by_id[session_id])
        except (SessionError, OSError) as error:
            return f"Cannot delete {session_id}: {error}"
        return None

    picked = SessionPickerApp(infos, delete=delete).run()
    return by_id.get(picked) if isinstance(picked, str) else None
