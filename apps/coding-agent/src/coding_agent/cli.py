"""``coding-agent``: the command line of the terminal coding agent.

::

    coding-agent                       a new session in this folder, in the TUI
    coding-agent --continue            the newest session of this folder
    coding-agent --resume [ID]         a session by id (or prefix); without ID, pick from a list
    coding-agent attach [SESSION]      a second TUI on a running session (default: this folder's
                                       newest running one)
    coding-agent -p "prompt"           headless: print the final answer
    coding-agent --json "prompt"       headless: stream the view events as JSON lines
                                       (--approve allow lets tools that need approval run)

    --model provider/id                the model (default: the offline ``faux`` demo without a key)
    --models PATTERNS                  the models Ctrl+P cycles through (``anthropic/*,openai/gpt-5*``)
    --dev, --facets-dir DIR            hot-reload facet packages from DIR (passed to the worker)
    --permission-mode MODE             ask, accept-edits, plan or auto, stored in the session
                                       (without it a session keeps its stored mode)
    --tool-calling native|text         how OpenAI-compatible models call tools (text: fenced
                                       blocks, for local models without native tool calling)
    --trust, --no-trust                trust (or not) this project folder: its own facet packages
                                       in .coding-agent/facets load only when it is trusted

The TUI modes run the session worker as its own process (it outlives a crashed TUI, and a
crashed worker is restarted); see :mod:`coding_agent.client`. Exit status: 0 on success, 1 when
a headless turn failed, 2 for a usage or session error.
"""

from __future__ import annotations

# Start-up: ``--help`` (and every parse error) must not pay for the heavy modules (chord,
# pico3, msgspec, Textual, the SDKs), so everything past ``argparse`` is imported where it is
# used, after the command line was parsed.
import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from coding_agent.permission_modes import PERMISSION_MODES

if TYPE_CHECKING:
    from coding_agent.sessions import Session

__all__ = ["build_parser", "main", "pick_session"]

EXIT_USAGE = 2


class _UsageError(Exception):
    """A problem with the command line or the chosen session (exit status 2)."""


def _patterns(text: str) -> list[str]:
    """``--models``: comma-separated ``provider/id`` patterns, each with a ``/``."""
    patterns = [part.strip() for part in text.split(",") if part.strip()]
    if not patterns:
        raise argparse.ArgumentTypeError("no model pattern given")
    for pattern in patterns:
        if "/" not in pattern:
            raise argparse.ArgumentTypeError(
                f"model pattern {pattern!r} is not provider/id (use e.g. anthropic/* or */gpt-5*)"
            )
    return patterns


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (``attach`` is the only subcommand; no subcommand runs the TUI)."""
    parser = argparse.ArgumentParser(
        prog="coding-agent",
        description="A terminal coding agent. Without arguments: a new session in the TUI.",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the newest session of this folder",
    )
    which.add_argument(
        "-r",
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="resume a session by id or id prefix (without ID: choose from a list)",
    )
    parser.add_argument(
        "--model", metavar="PROVIDER/ID", help="the model, e.g. anthropic/claude-sonnet-4-5"
    )
    parser.add_argument(
        "--models",
        metavar="PATTERNS",
        type=_patterns,
        default=[],
        help="comma-separated provider/id patterns (shell-style) that Ctrl+P cycles through",
    )
    parser.add_argument(
        "-p",
        "--print",
        dest="prompt",
        metavar="PROMPT",
        help="headless: run one prompt and print the final answer",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="",
        default=None,
        metavar="PROMPT",
        help="headless: run one prompt (or the -p prompt) and stream events as JSON lines",
    )
    parser.add_argument(
        "--approve",
        choices=("allow", "deny"),
        default="deny",
        help="headless: what tools that need approval get (default: deny)",
    )
    parser.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        help="the session's permission mode (stored in the session; without it the session "
        "keeps the mode it had, a new one starts in ask)",
    )
    parser.add_argument(
        "--dev",
        action="store_true",
        help="hot-reload facet packages from their source folders (see --facets-dir)",
    )
    parser.add_argument(
        "--facets-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="an extra facet package folder (repeatable)",
    )
    parser.add_argument(
        "--faux-script",
        metavar="FILE",
        help="script the offline faux model with a JSON file (demos and tests)",
    )
    parser.add_argument(
        "--tool-calling",
        choices=("native", "text"),
        help="how OpenAI-compatible models call tools: the API's tools (native) or fenced "
        "blocks in the text (text, for local models without tool support)",
    )
    trust = parser.add_mutually_exclusive_group()
    trust.add_argument(
        "--trust",
        dest="trust",
        action="store_const",
        const=True,
        default=None,
        help="trust this project folder (remembered): load its .coding-agent/facets packages",
    )
    trust.add_argument(
        "--no-trust",
        dest="trust",
        action="store_const",
        const=False,
        help="do not trust this project folder (remembered): skip its local facet packages",
    )
    commands = parser.add_subparsers(dest="command", metavar="{attach}")
    attach = commands.add_parser(
        "attach",
        help="attach another TUI to a running session",
        description="Attach a second TUI to a session whose worker is running.",
    )
    attach.add_argument("session", nargs="?", metavar="SESSION", help="session id or prefix")
    return parser


def pick_session(
    sessions: Sequence[Session], *, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout
) -> Session:
    """Ask which of ``sessions`` to resume (a numbered list; Enter takes the newest)."""
    if not sessions:
        raise _UsageError("there are no sessions to resume in this folder")
    for number, session in enumerate(sessions, 1):
        running = "  (running)" if session.worker_running() else ""
        created = session.created.astimezone().strftime("%Y-%m-%d %H:%M")
        stdout.write(f"{number:3}  {session.id}  {created}  {session.cwd}{running}\n")
    stdout.write("Resume which session? [1] ")
    stdout.flush()
    answer = stdin.readline().strip()
    if not answer:
        return sessions[0]
    if answer.isdigit() and 1 <= int(answer) <= len(sessions):
        return sessions[int(answer) - 1]
    raise _UsageError(f"no session number {answer!r}")


def _choose_session(args: argparse.Namespace, cwd: Path) -> Session:
    from coding_agent.sessions import create_session, latest_session, list_sessions, open_session

    if args.command == "attach":
        if args.session:
            session = open_session(args.session)
        else:
            running = [s for s in list_sessions(cwd) if s.worker_running()]
            if not running:
                raise _UsageError(
                    f"no running session in {cwd} to attach to (name one: attach SESSION)"
                )
            session = running[0]
        if not session.worker_running():
            raise _UsageError(
                f"session {session.id} has no running worker (use --resume {session.id})"
            )
        return session
    if args.continue_:
        session = latest_session(cwd)
        return session if session is not None else create_session(cwd, model=args.model)
    if args.resume is not None:
        if args.resume:
            return open_session(args.resume)
        return pick_session(list_sessions(cwd))
    return create_session(cwd, model=args.model)


async def _run_tui(args: argparse.Namespace, session: Session) -> int:
    from coding_agent.client.app_main import run_client
    from coding_agent.client.supervisor import WorkerStartError, WorkerSupervisor

    supervisor = WorkerSupervisor(
        session,
        model=args.model,
        dev=args.dev,
        facets_dirs=args.facets_dir,
        faux_script=args.faux_script,
        permission_mode=args.permission_mode,
    )
    try:
        run = await run_client(
            session,
            supervisor=supervisor,
            facets_dirs=args.facets_dir,
            model=args.model,
            models=args.models,
            dev=args.dev,
        )
    except WorkerStartError as error:
        print(f"coding-agent: {error}\n(worker log: {session.log_path})", file=sys.stderr)
        return EXIT_USAGE
    session = run.session or session  # /resume may have switched to another session
    print(f"Session {session.id} — continue it with: coding-agent --resume {session.id}")
    return 0


async def _run_headless(args: argparse.Namespace, session: Session) -> int:
    try:
        headless: Any = importlib.import_module("coding_agent.headless")
    except ModuleNotFoundError as error:
        if error.name != "coding_agent.headless":
            raise
        raise _UsageError("headless modes (-p, --json) are not available in this build") from None
    if session.worker_running():
        raise _UsageError(
            f"session {session.id} is open in a TUI; attach to it instead of running headless"
        )
    prompt = args.prompt if args.prompt is not None else args.json
    run = headless.run_json if args.json is not None else headless.run_print
    code = await run(
        prompt,
        session,
        out=sys.stdout,
        model=args.model,
        approve=args.approve,
        faux_script=args.faux_script,
        facets_dirs=args.facets_dir,
        permission_mode=args.permission_mode,
    )
    return int(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    headless = args.prompt is not None or args.json is not None
    if headless and args.command == "attach":
        parser.error("attach is a TUI mode; it does not take -p or --json")
    if args.json == "" and args.prompt is None:
        parser.error("--json needs a prompt: --json PROMPT or -p PROMPT --json")
    cwd = Path.cwd()
    args.facets_dir = [str(Path(folder).resolve()) for folder in args.facets_dir]
    if args.faux_script is not None:
        args.faux_script = str(Path(args.faux_script).resolve())
    if args.tool_calling is not None:
        # The worker (a child process, or in process when headless) reads it from the environment.
        from coding_agent.worker.providers.registry import TOOL_CALLING_ENV

        os.environ[TOOL_CALLING_ENV] = args.tool_calling
    import anyio

    from coding_agent.sessions import SessionError
    from coding_agent.trust import TrustError, TrustStore, check_project

    try:
        TrustStore.default().load()  # a corrupt trust file stops us before a session is made
        session = _choose_session(args, cwd)
        project = check_project(session.cwd, decide=args.trust)
        args.facets_dir += [str(folder) for folder in project.loaded_dirs]
        if headless and (warning := project.warning("--trust")) is not None:
            print(f"coding-agent: {warning}", file=sys.stderr)
        runner = _run_headless if headless else _run_tui
        return anyio.run(runner, args, session)
    except (_UsageError, SessionError, TrustError) as error:
        print(f"coding-agent: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
