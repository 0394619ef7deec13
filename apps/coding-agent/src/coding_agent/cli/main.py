"""``coding-agent``: the command line of the terminal coding agent.

::

    coding-agent                       a new session in this folder, in the TUI
    coding-agent --continue            the newest session of this folder
    coding-agent --resume [ID]         a session by id (or prefix); without ID, pick from a list
    coding-agent attach [SESSION]      a second TUI on a running session (default: this folder's
                                       newest running one)
    coding-agent attach tcp://HOST:PORT/SESSION   the TUI on a session of a coding-agent serve
    coding-agent serve [--listen tcp://HOST:PORT ...]   host sessions (docs/server.md)
    coding-agent web [SESSION]         a session in a browser (127.0.0.1, prints the page's URL)
    coding-agent db migrate postgresql://…   migrate the sessions' database (docs/postgresql.md)
    coding-agent config                the effective configuration, and where each value came from
    coding-agent doctor                are the packages the agent's safety depends on live? (1: no)
    coding-agent warm-start status|stop  the warm start's fork server (README "Warm start")
    coding-agent acp                   the agent for an editor, over the Agent Client Protocol
                                       (stdio; Zed, JetBrains, Neovim: README "Editors (ACP)")
    coding-agent -p "prompt"           headless: print the final answer (piped stdin is added to
                                       the prompt: git diff | coding-agent -p "review this")
    coding-agent --json "prompt"       headless: stream the view events as JSON lines
                                       (--approve allow lets tools that need approval run)
    coding-agent -p "prompt" --output-format json|stream-json   Claude Code's result object /
                                       its message lines (:mod:`coding_agent.cli.claude_output`);
                                       --max-turns N stops the run after N model turns
    coding-agent --output-format stream-json --input-format stream-json [--permission-prompt-tool
                                       stdio]   the Claude Agent SDK's protocol on stdin/stdout
                                       (:mod:`coding_agent.cli.claude_control`)
    coding-agent -p --model X "prompt" the prompt may stand anywhere among the options; with
                                       -p/--json a word naming a subcommand is the prompt
                                       (:mod:`coding_agent.cli.argv`)
    coding-agent --version

    --model provider/id                the model (default: the offline ``faux`` demo without a key)
    --models PATTERNS                  the models Ctrl+P cycles through (``anthropic/*,openai/gpt-5*``)
    --dev, --facets-dir DIR            hot-reload facet packages from DIR (passed to the worker)
    --permission-mode MODE             ask, accept-edits, sandbox, plan or auto, stored in the session
                                       (without it a session keeps its stored mode)
    --add-dir DIR                      one more working directory, read without asking (repeatable;
                                       stored in the session)
    --tool-calling native|text         how OpenAI-compatible models call tools (text: fenced
                                       blocks, for local models without native tool calling)
    --trust, --no-trust                trust (or not) this project folder: its own facet packages
                                       (and .coding-agent/config.toml) load only when it is trusted
    --thinking LEVEL                   the thinking level (off, minimal, low, medium, high, xhigh)
    --linger SECONDS                   how long the worker stays with no TUI and nothing running
    --allowedTools RULE... --disallowedTools RULE... --system-prompt[-file] X
    --append-system-prompt[-file] X --mcp-config FILE_OR_JSON... --strict-mcp-config
                                       Claude Code's run-scoped flags: this run only, stored
                                       nowhere (:mod:`coding_agent.settings.run_options`)

Launch settings (model, thinking level, permission mode, tool calling, --dev, --facets-dir,
--faux-script, linger, the trust decision) are stored with the session
(:class:`~coding_agent.session_files.folders.LaunchSettings`) and used by every later worker of it; a flag
given on a later command line overrides the stored value and is stored in its place.

The TUI modes run the session worker as its own process (it outlives a crashed TUI, and a
crashed worker is restarted); see :mod:`coding_agent.tui`. Every failure is one line on
stderr, ``coding-agent: error: ...``. Exit status: 0 on success, 1 when the provider or the
model failed (unknown model, missing API key, unreachable server, a failed turn), 2 for a usage,
configuration or session error, 3 when a headless turn ended but a tool call was blocked for
lack of approval, 130 when interrupted (a headless run's first SIGINT or SIGTERM aborts its turn
durably and reports it: :mod:`coding_agent.cli.interrupt`).

Why one module: it is the one command line of the app: the parser, its subcommands and the dispatch
that runs them share the flags and the error handling (usage errors, start failures and exit
codes), so a reader sees every flag next to what it does.
"""

from __future__ import annotations

# Start-up: ``--help`` (and every parse error) must not pay for the heavy modules (chord,
# pico3, msgspec, Textual, the SDKs), so everything past ``argparse`` is imported where it is
# used, after the command line was parsed.
import argparse
import math
import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeGuard

from coding_agent.cli.argv import (
    PiFlagError,
    is_headless,
    pi_words,
    split_wait_value,
    wait_seconds,
)
from coding_agent.cli.claude_flags import (
    add_run_flags,
    add_session_flags,
    check_session_flags,
    claude_flag_hint,
    permission_mode,
    run_flags,
)
from coding_agent.settings.changes import THINKING_LEVELS
from coding_agent.settings.facets_site import activate
from coding_agent.settings.permission_modes import PERMISSION_MODES
from coding_agent.worker.gc_policy import freeze_at_exit, pause_for_start_up, start_up_done

if TYPE_CHECKING:
    from coding_agent.cli.interrupt import Interrupt
    from coding_agent.session_files.folders import LaunchSettings, Session, SessionError
    from coding_agent.settings.config import EffectiveConfig

__all__ = [
    "SUBCOMMANDS",
    "build_headless_parser",
    "build_parser",
    "main",
    "parse_command_line",
    "pick_session",
    "prebuild_parser",
]

SUBCOMMANDS = (
    "attach", "serve", "web", "config", "doctor", "acp", "sessions", "export", "import", "facets",
    "db", "warm-start",
)  # fmt: skip
"""The subcommands: the first word of their command lines (none takes -p or --json)."""

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BLOCKED = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class _UsageError(Exception):
    """A problem with the command line or the chosen session (exit status 2)."""


class _Failure(Exception):
    """The provider or the model failed (exit status 1)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``coding-agent: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        hint = claude_flag_hint(message)
        _usage_exit(f"{message}; {hint}" if hint else message)


def _usage_exit(message: str, args: argparse.Namespace | None = None) -> NoReturn:
    """A usage error: one line on stderr, exit status 2. ``args``: the parsed command line,
    when the error is found after parsing (a headless ``--output-format json|stream-json``
    run then gets Claude Code's error result on stdout too: :func:`_report_failure`)."""
    line = f"{message} (see coding-agent --help)"
    sys.stderr.write(f"coding-agent: error: {line}\n")
    if args is not None:
        _report_failure(args, line)
    sys.exit(EXIT_USAGE)


def _report_failure(args: argparse.Namespace, message: str, session_id: str = "") -> None:
    """A failure after the command line was parsed (its one ``coding-agent: error:`` line is on
    stderr): ``-p --output-format json|stream-json`` also writes Claude Code's error result on
    stdout (:func:`~coding_agent.cli.claude_output.failure_result`), so a script reading
    ``| jq .result`` reads why. argparse's own errors (an unknown flag, a value of the wrong
    type or choice) come before the output format is known and write nothing on stdout, as
    Claude Code's do; ``--json`` and ``-p`` without it write nothing on stdout either."""
    headless = args.prompt is not None and getattr(args, "json", None) is None
    output = getattr(args, "output_format", None)
    if not headless or output not in ("json", "stream-json"):
        return
    # lazy: start-up time (only a failed run writes the result)
    from coding_agent.cli.claude_output import failure_result

    failure_result(sys.stdout, message, stream=output == "stream-json", session_id=session_id)


class _Version(argparse.Action):
    """``--version``: the installed package's version (looked up only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        import importlib.metadata

        try:
            version = importlib.metadata.version("pico-coding-agent")
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
            version = "unknown"
        sys.stdout.write(f"coding-agent {version}\n")
        parser.exit(0)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def _wait_seconds(text: str) -> float:
    """``--wait-for-approval``'s value: seconds, or ``inf`` (until answered, as without one)."""
    try:
        return wait_seconds(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0") from None


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


HELP_EXAMPLE_MODEL = "anthropic/claude-sonnet-4-6"
"""The model ``--help`` names as its example. It must be
:data:`~coding_agent.settings.model_config.EXAMPLE_MODEL`, the one the errors name (from
pico3's current model names), but ``--help`` imports nothing heavy to print (pico3, chord,
msgspec: ``tests/app/tui/process/test_cli.py``), so it is written out here and
``tests/app/cli/test_help_example_model.py`` pins the two together: a new sonnet in pico3's
table fails that test until this line follows."""


def _new_parser() -> _Parser:
    return _Parser(
        prog="coding-agent",
        description="A terminal coding agent. Without arguments: a new session in the TUI.",
        epilog="Exit status: 0 ok, 1 the provider or model failed, 2 usage, configuration or "
        "session error, 3 a headless tool call was blocked for lack of approval "
        "(allow it with --approve allow or --permission-mode), 130 interrupted.",
    )


def build_headless_parser() -> argparse.ArgumentParser:
    """The argument parser of a headless run (``-p``/``--json``): the options and the prompt,
    in any order (:meth:`~argparse.ArgumentParser.parse_intermixed_args`); no subcommands."""
    parser = _new_parser()
    _add_options(parser)
    parser.add_argument(
        "words", nargs="*", metavar="PROMPT", help="the prompt (or give it to -p/--json)"
    )
    return parser


def _add_options(parser: argparse.ArgumentParser) -> None:
    """The options of the command line itself (not of a subcommand)."""
    parser.add_argument("--version", action=_Version)
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
        "--model", metavar="PROVIDER/ID", help=f"the model, e.g. {HELP_EXAMPLE_MODEL}"
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
        nargs="?",
        const="",
        default=None,
        metavar="PROMPT",
        help="headless: run one prompt and print the final answer (piped stdin is added); the "
        "prompt may also stand anywhere among the options (-p --model X PROMPT)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="headless: print the session id (and model, folder) on stderr",
    )
    parser.add_argument(
        "--thinking",
        choices=THINKING_LEVELS,
        help="the thinking level (stored in the session)",
    )
    parser.add_argument(
        "--linger",
        type=_seconds,
        metavar="SECONDS",
        help="how long the worker keeps running with no TUI and nothing live "
        "(stored in the session; default 600, 0 never)",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="",
        default=None,
        metavar="PROMPT",
        help="headless: run one prompt (or the -p prompt) and stream events as JSON lines; the "
        "prompt may also stand anywhere among the options (--json --model X PROMPT)",
    )
    parser.add_argument(
        "--output-format",
        choices=("text", "json", "stream-json"),
        help="-p: what stdout gets, as Claude Code's -p writes it: text (the answer, the "
        "default), json (one result object at the end) or stream-json (a JSON line per "
        "message, the result last); README 'Headless runs'",
    )
    parser.add_argument(
        "--input-format",
        choices=("text", "stream-json"),
        help="headless: what stdin holds, as Claude Code's: text (piped text below the -p "
        "prompt, the default) or stream-json (user messages and control requests as JSON lines, "
        "a turn each until stdin closes: the Claude Agent SDK's protocol; needs --output-format "
        "stream-json); README 'Driving it from the Claude Agent SDK'",
    )
    parser.add_argument(
        "--include-partial-messages",
        action="store_true",
        help="with --output-format stream-json: the answers stream as they are written too "
        "(Claude Code's stream_event lines: text and thinking deltas)",
    )
    parser.add_argument(
        "--permission-prompt-tool",
        metavar="stdio",
        help="with --input-format stream-json: stdio sends every approval as a can_use_tool "
        "request on stdout, and the Agent SDK's answer decides it",
    )
    parser.add_argument(
        "--max-turns",
        type=_turns,
        metavar="N",
        help="-p: stop after N model turns (as Claude Code's --max-turns; a model still calling "
        "tools then ends the run with exit 1, error_max_turns)",
    )
    parser.add_argument(
        "--approve",
        choices=("allow", "deny"),
        default="deny",
        help="headless: what tools that need approval get (default: deny)",
    )
    parser.add_argument(
        "--wait-for-approval",
        nargs="?",
        type=_wait_seconds,
        const=math.inf,
        default=None,
        metavar="SECONDS",
        help="headless: leave an approval open for another client (coding-agent attach SESSION, "
        "an editor) to answer, SECONDS long (default: until answered), then answer as --approve "
        "says; a next word that is not a number is the prompt",
    )
    parser.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        type=permission_mode,
        help="the session's permission mode (stored in the session; without it the session "
        "keeps the mode it had, a new one starts in ask; Claude Code's default, acceptEdits "
        "and plan are taken too)",
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
        "--add-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="one more working directory: the file tools read there without asking, and edits "
        "there follow the permission mode as in the project (repeatable; stored in the session)",
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
    parser.add_argument("--name", metavar="TEXT", help="name the session (shown in pickers)")
    add_run_flags(parser)
    add_session_flags(parser)
    _add_server_client_flags(parser, suppress=False)
    parser.add_argument(
        "--server",
        metavar="tcp://HOST:PORT[/SESSION]",
        help="-p/--json: run the prompt on a coding-agent serve (a new session, or SESSION)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command line but a headless run's (subcommands; no
    subcommand runs the TUI)."""
    parser = _new_parser()
    _add_options(parser)
    commands = parser.add_subparsers(
        dest="command",
        metavar="{" + ",".join(SUBCOMMANDS) + "}",
    )
    commands.add_parser(
        "config",
        help="print the effective configuration and where each value came from",
        description="Print the effective configuration (config.toml files, environment, "
        "defaults) and where each value came from, then what a session started here loads: "
        "context files (CLAUDE.md, AGENTS.md), hooks, subagents, skills, commands and MCP "
        "servers, each with its file; an untrusted project's are listed as waiting for /trust "
        "(nothing is run).",
    )
    commands.add_parser(
        "doctor",
        help="check that the packages the agent's safety depends on are live",
        description="Check that every package the agent's safety depends on (facets-approval) "
        "is installed, loads and approves tool calls; list the default feature packages. "
        "Exits 1 when a safety package is not live (tool calls that need approval are then "
        "blocked).",
    )
    warm = commands.add_parser(
        "warm-start",
        help="show or stop the warm start's fork server",
        description="The warm start (on unless warm_start = false in your config.toml or "
        "CODING_AGENT_WARM_START=0): a preloaded server that forks headless runs and session "
        "workers. status: is it on, is a server running; stop: end the server (it also ends "
        "after 10 idle minutes).",
    )
    warm.add_argument("action", choices=("status", "stop"), help="status or stop")
    acp = commands.add_parser(
        "acp",
        help="serve an editor over the Agent Client Protocol (stdio)",
        description="Speak the Agent Client Protocol on stdin/stdout for an editor (Zed, "
        "JetBrains, Neovim); sessions are this agent's durable sessions (session/load resumes "
        "one). --model and --faux-script apply to the sessions it opens.",
    )
    acp.add_argument("--model", metavar="PROVIDER/ID", default=argparse.SUPPRESS)
    acp.add_argument("--faux-script", metavar="FILE", default=argparse.SUPPRESS)
    attach = commands.add_parser(
        "attach",
        help="attach another TUI to a running session",
        description="Attach a second TUI to a session whose worker is running.",
    )
    attach.add_argument(
        "session",
        nargs="?",
        metavar="SESSION",
        help="session id or prefix, or tcp://HOST:PORT/SESSION on a coding-agent serve",
    )
    _add_server_client_flags(attach, suppress=True)
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.server.args import add_serve_command, add_web_command

    add_serve_command(commands, _seconds)
    add_web_command(commands)
    from coding_agent.cli.sessions import add_session_commands

    add_session_commands(commands)
    from coding_agent.cli.importing import add_import_command

    add_import_command(commands)
    from coding_agent.cli.facets import add_facets_commands

    add_facets_commands(commands)
    from coding_agent.cli.db import add_db_commands

    add_db_commands(commands)
    return parser


def _add_server_client_flags(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``--token-file``, ``--tls-ca``, ``--insecure``: how a client reaches a server (on the
    main parser for ``-p --server``, and on ``attach``, where they may follow the URL)."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file with a server's bearer token, alone or as one NAME TOKEN line "
        "(default: $CODING_AGENT_TOKEN)",
        **default,
    )
    parser.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="the CA (or self-signed certificate) a server's TLS certificate is checked against",
        **default,
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="plain TCP to a server without TLS (loopback addresses only)",
        **default,
    )


def pick_session(
    sessions: Sequence[Session], *, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout
) -> Session:
    """Ask which of ``sessions`` to resume: on a terminal the session picker (typing filters,
    Ctrl+D deletes), else a numbered list (Enter takes the newest)."""
    if not sessions:
        raise _UsageError("there are no sessions to resume in this folder")
    if stdin.isatty() and stdout.isatty():
        # lazy: start-up time (the command line imports only what the chosen command runs)
        from coding_agent.cli.sessions import pick_interactively

        picked = pick_interactively(sessions)
        if picked is None:
            raise _UsageError("no session chosen")
        return picked
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


def _warn_broken(error: SessionError) -> None:
    print(f"coding-agent: warning: {error}", file=sys.stderr)


def _added_dirs(args: argparse.Namespace) -> list[str]:
    """``--add-dir`` folders made absolute; a missing one, or the flag where no session starts
    here, is a usage error (one line)."""
    if not args.add_dir:
        return []
    if getattr(args, "command", None) in SUBCOMMANDS or getattr(args, "server", None):
        _usage_exit(
            "--add-dir is for a session started here (the TUI, -p, --json, --continue, "
            "--resume); other sessions take additional_directories from your config.toml or "
            "permissions.additionalDirectories from ~/.claude/settings.json",
            args,
        )
    found: list[str] = []
    for folder in args.add_dir:
        path = Path(folder).expanduser()
        if not path.is_dir():
            _usage_exit(f"--add-dir {folder}: no such folder", args)
        found.append(str(path.resolve()))
    return found


def _launch_settings(args: argparse.Namespace, stored: LaunchSettings) -> LaunchSettings:
    """The stored launch settings with every flag given on this command line in place."""
    import msgspec

    given: dict[str, Any] = {}
    if args.model is not None:
        given["model"] = args.model
    if args.thinking is not None:
        given["thinking"] = args.thinking
    if args.permission_mode is not None:
        given["permission_mode"] = args.permission_mode
    if args.tool_calling is not None:
        given["tool_calling"] = args.tool_calling
    if args.dev:
        given["dev"] = True
    if args.facets_dir:
        given["facets_dirs"] = tuple(args.facets_dir)
    if args.add_dir:  # joined to the stored ones: a later --add-dir adds, never forgets
        given["add_dirs"] = tuple(dict.fromkeys([*stored.add_dirs, *args.add_dir]))
    if args.trust is not None:
        given["trust"] = args.trust
    if args.faux_script is not None:
        given["faux_script"] = args.faux_script
    if args.linger is not None:
        given["linger"] = args.linger
    return msgspec.structs.replace(stored, **given)


def _choose_session(args: argparse.Namespace, cwd: Path) -> tuple[Session, bool]:
    """The session to run and whether this command created it."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.session_files.folders import (
        LaunchSettings,
        check_writable,
        create_session,
        latest_session,
        list_sessions,
        open_session,
    )

    if args.command == "attach":
        if args.session:
            session = open_session(args.session)
        else:
            found = list_sessions(cwd, on_broken=_warn_broken)
            running = [s for s in found if s.worker_running()]
            if not found:
                raise _UsageError(f"no session in {cwd} to attach to (name one: attach SESSION)")
            session = running[0] if running else found[0]
        if not session.worker_running():
            # the TUI and its worker both died (or the worker lingered out): start one, as
            # --resume does, rather than refuse
            check_writable(session)
            print(
                f"coding-agent: session {session.id} had no running worker: starting one",
                file=sys.stderr,
            )
        return session, False
    if args.continue_:
        session = latest_session(cwd, on_broken=_warn_broken)
        if session is not None:
            check_writable(session)
            return _forked(args, session)
        note = f"no session of {cwd} to continue: starting a new one"
        print(f"coding-agent: {note}", file=sys.stderr)
        # the TUI covers stderr at once: it says so itself (_run_tui), as Claude Code does
        args.start_notes = [*getattr(args, "start_notes", []), note[0].upper() + note[1:]]
    elif args.resume is not None:
        if args.resume:
            session = open_session(args.resume)
        else:
            session = pick_session(list_sessions(cwd, on_broken=_warn_broken))
        check_writable(session)
        return _forked(args, session)
    settings = _launch_settings(args, LaunchSettings())
    return create_session(cwd, settings=settings, session_id=args.session_id), True


def _forked(args: argparse.Namespace, session: Session) -> tuple[Session, bool]:
    """The session resumed (``session``), or with ``--fork-session`` its fork (new: a start
    that fails removes it, as it does a new session)."""
    if not args.fork_session:
        return session, False
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.session_files.forks import fork_session

    fork = fork_session(session, session_id=args.session_id)
    if args.verbose:
        print(f"coding-agent: session {fork.id} forked from {session.id}", file=sys.stderr)
    return fork, True


async def _run_tui(
    args: argparse.Namespace,
    session: Session,
    tui_dirs: list[str],
    start_up_done: Callable[[], None],
    keeps_log: bool = True,
) -> int:
    """The TUI on ``session``. ``keeps_log``: the session (its worker log) outlives a failed
    start; a new one is removed (:func:`main`), so its error names no log file."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.supervisor import WorkerStartError, WorkerSupervisor

    # The worker reads its launch settings from session.json; only the explicit choices that
    # change the conversation (model, thinking level, permission mode) go on its command line,
    # and Claude Code's run-scoped flags (--allowedTools...), which are stored nowhere.
    supervisor = WorkerSupervisor(
        session,
        model=args.model,
        thinking=args.thinking,
        permission_mode=args.permission_mode,
        run=args.run,
    )
    refused = supervisor.refusal()  # --allowedTools... with a worker already serving
    if refused is not None:
        raise _UsageError(refused)
    # Spawned first, so the worker starts while this process imports the TUI and paints it;
    # the TUI takes typing at once and sends what was typed as soon as the worker serves.
    await supervisor.launch()
    from coding_agent.settings.secret_env import hide_secrets_from_proc
    from coding_agent.tui.main import ClientRun, run_client

    # The worker's commands may read /proc/<this pid>/environ (the worker has its own copy of
    # the environment: this blanks only this process's, before any command can run).
    hide_secrets_from_proc(session.cwd)

    notes: list[str] = list(getattr(args, "start_notes", []))  # _choose_session's

    def say_notes(run: ClientRun) -> None:
        for note in notes:  # what the command line said on stderr, under the TUI's screen
            run.app.notify(note, severity="warning", timeout=10)

    try:
        run = await run_client(
            session,
            supervisor=supervisor,
            facets_dirs=tui_dirs,
            model=args.model,
            models=args.models,
            dev=session.settings.dev,
            on_start=say_notes if notes else None,
            on_painted=start_up_done,  # the collector's start-up pause ends here
        )
    except WorkerStartError as error:
        if keeps_log:
            message = f"{error.reason()} (worker log: {session.log_path})"
        else:  # the worker's own error line, else the log's last lines: the log goes with it
            message = error.reason()
        if error.status == EXIT_USAGE:
            raise _UsageError(message) from None
        raise _Failure(message) from None
    session = run.session or session  # /resume may have switched to another session
    again = f"{resume_prefix()} --resume {session.id}"
    if args.run is not None and not run.stopped_elsewhere:  # supervisor.release stopped it
        print(
            f"Session {session.id} stopped with this run ({', '.join(args.run.names())} end "
            f"with it) — continue it with: {again}"
        )
    elif run.stopped:
        print(f"Session {session.id} stopped — continue it with: {again}")
    elif run.stopped_elsewhere:
        print(
            f"Session {session.id} was stopped outside this window (/stop in another one, "
            f"say) — continue it with: {again}"
        )
    else:
        print(
            f"Session {session.id} keeps running in the background (it stops by itself when "
            f"idle; /stop ends it) — continue it with: {again}"
        )
    return 0


def resume_prefix(env: Mapping[str, str] | None = None) -> str:
    """How the user started the agent, for the command that continues a session: ``uv run
    coding-agent`` under ``uv run`` (which sets ``UV_RUN_RECURSION_DEPTH``; the console script
    is then on no PATH of the shell), else ``coding-agent``.

    Under ``uv run`` from outside the project (the README's ``uv run --project "$PWD"
    --directory "$(mktemp -d)" coding-agent``, then ``cd`` elsewhere) a bare ``uv run`` would
    find no project where the shell is (``PWD``), so the prefix names it: ``uv run --project
    /src/clone coding-agent`` (the project holds the environment uv ran, ``VIRTUAL_ENV``)."""
    environ = os.environ if env is None else env
    if not environ.get("UV_RUN_RECURSION_DEPTH"):
        return "coding-agent"
    venv = environ.get("VIRTUAL_ENV")
    project = Path(venv).parent if venv else None
    if project is None or not (project / "pyproject.toml").is_file():
        return "uv run coding-agent"
    shell = Path(environ.get("PWD") or os.getcwd())
    if shell.resolve().is_relative_to(project.resolve()):
        return "uv run coding-agent"
    import shlex  # lazy: start-up time

    return f"uv run --project {shlex.quote(str(project))} coding-agent"


def _read_prompt(args: argparse.Namespace, stdin: TextIO) -> str:
    """The headless prompt: the -p/--json text, with piped stdin added below it (with
    ``--input-format stream-json`` stdin holds the prompts: none here)."""
    if args.input_format == "stream-json":
        return ""
    prompt: str = args.prompt if args.prompt is not None else args.json
    piped = ""
    try:
        fd = stdin.fileno()
        mode = os.fstat(fd).st_mode
        readable = not os.isatty(fd) and (
            stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)
        )
    except (OSError, ValueError, AttributeError):
        readable = False
    if readable:
        piped = stdin.read()
    if piped.strip():
        prompt = f"{prompt}\n\n{piped}" if prompt.strip() else piped
    if not prompt.strip():
        flag = "-p" if args.prompt is not None else "--json"
        raise _UsageError(
            f'{flag} needs a prompt: {flag} "PROMPT", or pipe one in '
            f"(echo PROMPT | coding-agent {flag}){_listed_words(args)}"
        )
    return prompt


_LIST_FLAGS = {
    "allowed_tools": "--allowedTools",
    "disallowed_tools": "--disallowedTools",
    "mcp_config": "--mcp-config",
}
"""The options that take every next word (``nargs="+"``), so a prompt after them is theirs."""


def _listed_words(args: argparse.Namespace) -> str:
    """Where a missing prompt may have gone: the list options given take every next word
    (``-p --allowedTools Read "fix it"``: ``fix it`` is two rules), so the prompt goes first."""
    given = [flag for dest, flag in _LIST_FLAGS.items() if getattr(args, dest, None)]
    if not given:
        return ""
    takes = "takes" if len(given) == 1 else "take"
    return (
        f"; {' and '.join(given)} {takes} every next word, a prompt after it too: write the "
        f'prompt first (-p "PROMPT" {given[0]} ...) or end the list with another flag'
    )


def _turns(value: str) -> int:
    """``--max-turns``' value: a whole number of 1 or more."""
    try:
        turns = int(value)
    except ValueError:
        turns = 0
    if turns < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {value!r}")
    return turns


def _check_claude_output(args: argparse.Namespace, headless: bool) -> None:
    """``--output-format`` and ``--max-turns`` are for a headless run, and ``--output-format``
    does not go with ``--json`` (two shapes for one stdout). ``--max-turns`` is enforced by
    whichever process runs the session (:mod:`coding_agent.worker.max_turns`): this one, a
    server's worker (``--server``) or a worker of its own (``--wait-for-approval``)."""
    for flag, value in (("--output-format", args.output_format), ("--max-turns", args.max_turns)):
        if value is not None and not headless:
            _usage_exit(f'{flag} is for a headless run: coding-agent -p "PROMPT" {flag} ...', args)
    if args.output_format is not None and args.json is not None:
        _usage_exit(
            "--json streams this agent's events, --output-format writes Claude Code's shapes: "
            'choose one (-p "PROMPT" --output-format json, or --json "PROMPT")',
            args,
        )
    _check_stream_input(args)


def _check_stream_input(args: argparse.Namespace) -> None:
    """``--input-format stream-json`` (the Agent SDK's protocol, :mod:`coding_agent.cli.
    claude_control`) and ``--include-partial-messages`` write Claude Code's stream-json and run
    in this process;
    ``--permission-prompt-tool`` takes ``stdio`` with it only (an MCP tool as the prompt is not
    served: the approvals would go unanswered)."""
    streaming = args.input_format == "stream-json"
    tool = args.permission_prompt_tool
    if tool is not None and tool != "stdio":
        _usage_exit(
            f"--permission-prompt-tool {tool}: only stdio is served here (the Agent SDK's "
            "can_use_tool callback, with --input-format stream-json); an MCP tool as the "
            "permission prompt is not"
        )
    if tool is not None and not streaming:
        _usage_exit(
            "--permission-prompt-tool stdio asks over the stream-json control protocol: give "
            "--input-format stream-json --output-format stream-json too"
        )
    if args.include_partial_messages:
        if args.output_format != "stream-json":
            _usage_exit("--include-partial-messages needs --output-format stream-json")
        for flag, value in (
            ("--server", args.server),
            ("--wait-for-approval", args.wait_for_approval),
        ):
            if value is not None:
                _usage_exit(
                    f"--include-partial-messages streams a run in this process: leave {flag} out"
                )
    if not streaming:
        return
    if args.output_format != "stream-json":
        _usage_exit("--input-format stream-json needs --output-format stream-json")
    given = args.prompt or args.json is not None or getattr(args, "words", None)
    if given:
        _usage_exit(
            "with --input-format stream-json the prompts come on stdin as user lines: leave the "
            "prompt out"
        )
    for flag, value in (("--server", args.server), ("--wait-for-approval", args.wait_for_approval)):
        if value is not None:
            _usage_exit(f"--input-format stream-json runs the session here: leave {flag} out")


async def _run_headless(
    args: argparse.Namespace, session: Session, prompt: str, interrupt: Interrupt
) -> int:
    """The headless run; ``interrupt`` hears its SIGINT/SIGTERM (the first aborts the turn,
    :mod:`coding_agent.cli.interrupt`)."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.cli.headless import headless_mode, interrupted_reporter, run_headless
    from coding_agent.worker.main import session_worker_config

    if session.worker_running():
        raise _UsageError(
            f"session {session.id} is open in a TUI; attach to it instead of running headless"
        )
    for warning in session.settings.gone_add_dirs():  # (the TUI shows them as notices)
        print(f"coding-agent: warning: {warning}", file=sys.stderr)
    config = session_worker_config(
        session,
        model=args.model,
        thinking=args.thinking,
        permission_mode=args.permission_mode,
        run=args.run,
        fallback_model=args.fallback_model,
    )
    if config.environment is not None:  # this process is the worker now: keys stay in config.env
        config.environment.withhold_from_process()
    mode = headless_mode(args.json is not None, args.output_format)
    channel = None
    if args.input_format == "stream-json":
        # lazy: start-up time (the command line imports only what the chosen command runs)
        from coding_agent.cli.claude_control import ControlChannel

        channel = ControlChannel(sys.stdout, sys.stderr)
    interrupt.report = interrupted_reporter(
        mode, sys.stdout, sys.stderr, session=session.id, cwd=str(session.cwd)
    )
    if args.wait_for_approval is not None:  # the worker runs apart, so others can answer
        # lazy: start-up time (the command line imports only what the chosen command runs)
        from coding_agent.cli.attach import run_parked_headless

        return await run_parked_headless(
            prompt, session, wait=args.wait_for_approval, mode=mode, out=sys.stdout,
            approve=args.approve, verbose=args.verbose, model=args.model,
            thinking=args.thinking, permission_mode=args.permission_mode, interrupt=interrupt,
            run=args.run, max_turns=args.max_turns,
        )  # fmt: skip

    def unanswered() -> None:
        args.unanswered = True

    return await run_headless(
        prompt, config, mode=mode, out=sys.stdout, approve=args.approve, verbose=args.verbose,
        on_unanswered=unanswered, interrupt=interrupt, max_turns=args.max_turns,
        channel=channel, sdk_approvals=args.permission_prompt_tool == "stdio",
        partial=args.include_partial_messages,
    )  # fmt: skip


def _print_config(cwd: Path) -> int:
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.settings.config import load_config
    from coding_agent.settings.model_config import provider_variables
    from coding_agent.worker.providers.registry import resolve_model

    config = load_config(cwd)
    lines: list[tuple[str, str]] = []

    def show(key: str, value: Any, origin: str) -> None:
        lines.append((f"{key} = {value!r}" if not isinstance(value, str) else f"{key} = {value}",
                      origin))  # fmt: skip

    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.settings.permissions import PermissionFiles

    rule_files = PermissionFiles(cwd)
    permissions = rule_files.load()  # the rules' grammar is checked by the session
    read = [*config.pi_files, *config.files, *rule_files.claude_files]
    print(f"# files read: {', '.join(str(path) for path in read) or 'none'}")
    if config.user_file is not None and not config.user_file.exists():
        print(f"# (no {config.user_file}: create it to configure the agent)")
    if config.skipped is not None:
        print(f"# not read: {config.skipped} (the project is not trusted: coding-agent --trust)")
    try:
        selection = resolve_model(None, config=config.registry())
        model = selection.ref
        if config.model is not None:
            origin = config.origin["model"]
        elif model.startswith("faux/"):
            origin = "default (no API key or base URL set)"
        else:
            origin = "environment (the first provider with a key)"
    except ValueError as error:
        model, origin = config.model or "?", f"error: {error}"
    show("model", model, origin)
    show("thinking", config.thinking or "off", config.origin.get("thinking", "default"))
    show("theme", config.theme or "dark", config.origin.get("theme", "default"))
    claude = rule_files.claude_mode(config.permission_mode)
    show(
        "permission_mode",
        claude[0] if claude else config.permission_mode or "ask",
        f"{claude[1]} (permissions.defaultMode)"
        if claude
        else config.origin.get(
            "permission_mode", "default (new sessions; --permission-mode overrides)"
        ),
    )
    working = rule_files.working_directories()
    show(
        "permissions.additional_directories",
        list(working.added),
        "your config.toml and ~/.claude/settings.json (--add-dir and /add-dir add more)"
        if working.added
        else "default (--add-dir, /add-dir, or additional_directories in your config.toml or "
        "~/.claude/settings.json add folders)",
    )
    show(
        "permissions.block_reads_outside_working_directories",
        working.block_reads_outside,
        "any of the permission files" if working.block_reads_outside else "default",
    )
    for key, source in rule_files.restrictions().items():  # Claude Code's restrictive switches
        show(f"permissions.{key}", "on", f"{source} (Claude Code; a file only turns it on)")
    from coding_agent.settings.warm_start import enabled as warm_start_enabled

    warm, origin = warm_start_enabled()
    if origin == "default":
        origin = "default (warm_start = false turns it off)"
    elif not origin.startswith(("environment", "default")):
        origin = config.origin.get("warm_start", origin)
    show("warm_start", "on" if warm else "off", origin)
    environment = {
        f"providers.{name}.{field}": variable
        for (name, field), variable in provider_variables().items()
    }
    names = dict.fromkeys([*(name for name, _ in provider_variables()), *config.providers])
    for name in names:
        values = dict(config.providers.get(name, {}))
        env_key = values.get("api_key_env")
        for field in ("base_url", "region", "project", "profile", "api_key_env", "api_key"):
            key = f"providers.{name}.{field}"
            if field in values:
                shown = "(set)" if field == "api_key" else values[field]
                show(key, shown, config.origin.get(key, "?"))
            elif field != "api_key_env":
                variable = env_key if field == "api_key" and env_key else environment.get(key)
                if variable and os.environ.get(variable):
                    shown = "(set)" if field == "api_key" else os.environ[variable]
                    show(key, shown, f"environment ${variable}")
        for flag, value in dict(values.get("compat") or {}).items():
            key = f"providers.{name}.compat.{flag}"
            show(key, value, config.origin.get(key, "?"))
    _show_secrets(config, show)
    _show_sandbox(config, show)
    _show_web(config, show)
    _show_notifications(config, show)
    for model_entry in config.models:
        ref = f"{model_entry['provider']}/{model_entry['id']}"
        details = ", ".join(
            f"{key}={value}" for key, value in model_entry.items() if key not in ("provider", "id")
        )
        show(f"models.{ref}", details or "(defaults)", config.origin.get(f"models.{ref}", "?"))
    for rule in permissions["rules"]:
        show(f"permissions.{rule['kind']}", rule["rule"], rule["source"])
    plugin_problems = _show_plugins(cwd, show)
    width = min(max(len(text) for text, _ in lines), 56)
    for text, origin in lines:
        print(f"{text:<{width}}  # {origin}")
    for problem in permissions["problems"]:  # Claude Code settings not read included
        print(f"# permission rules: {problem}")
    for problem in plugin_problems:
        print(f"# plugins: {problem}")
    for warning in config.warnings:  # pi's setup: what is not used (settings.pi_setup)
        print(f"# warning: {warning}")
    for note in config.notes:
        print(f"# pi: {note}")
    # what a session started here picks up, through the loaders the session uses
    from coding_agent.cli.config_sections import (
        ORDER,
        app_sections,
        config_sections,
        print_sections,
        shorten,
    )

    sections = [*app_sections(cwd), *config_sections(cwd)]
    sections.sort(key=lambda s: ORDER.index(s["title"]) if s["title"] in ORDER else len(ORDER))
    print_sections(sections, sys.stdout, shorten(cwd))
    return 0


def _show_plugins(cwd: Path, show: Callable[[str, Any, str], None]) -> tuple[str, ...]:
    """The ``plugins`` lines of ``coding-agent config``: each Claude Code plugin that loads (its
    folder, and the settings file that enabled it); returns the problems met."""
    from coding_agent.context.resources import Places

    places = Places.find(cwd)
    found = places.plugins()
    for plugin in found.plugins:
        parts = [kind for kind in ("commands", "skills", "agents") if plugin.paths(kind)]
        parts += ["hooks"] * bool(plugin.hooks())
        parts += ["mcpServers"] * bool(plugin.to_json()["mcpServers"])
        show(
            f"plugins.{plugin.id}",
            str(plugin.root),
            f"{plugin.enabled_by} (enabledPlugins): {', '.join(parts) or 'nothing to load'}",
        )
    return found.warnings


def _show_secrets(config: EffectiveConfig, show: Callable[[str, Any, str], None]) -> None:
    """The ``secrets`` lines of ``coding-agent config``: what child processes never see."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.settings.secret_env import secret_names

    names = secret_names(secrets=config.secrets, registry=config.registry())
    withheld = [name for name in names if name not in config.secrets_passthrough]
    origin = "withheld from bash, ! commands, jobs, MCP servers: provider keys, server token"
    if "secrets" in config.origin:
        origin += f" + {config.origin['secrets']}"
    show("secrets", ", ".join(withheld), origin)
    if config.secrets_passthrough:
        show(
            "secrets_passthrough",
            ", ".join(config.secrets_passthrough),
            config.origin.get("secrets_passthrough", "?"),
        )


def _show_sandbox(config: EffectiveConfig, show: Callable[[str, Any, str], None]) -> None:
    """The ``sandbox`` lines of ``coding-agent config``: the policy and whether it can start."""
    from pico3 import DEFAULT_DENY_READ, sandbox_available

    status = sandbox_available()
    show("sandbox", "available" if status.available else "unavailable", status.reason)
    show("sandbox.enabled", config.sandbox_enabled, config.origin.get("sandbox.enabled", "default"))
    hidden = [
        *DEFAULT_DENY_READ, "the agent's config and session storage", "pi's auth.json",
        "the session's sockets ($XDG_RUNTIME_DIR, Docker's, X11's)",
    ]  # fmt: skip
    origin = "built in" + (
        f" + {config.origin['sandbox.deny_read']}" if config.sandbox_deny_read else ""
    )
    show("sandbox.deny_read", ", ".join([*hidden, *config.sandbox_deny_read]), origin)
    writable = ["the project", "$TMPDIR (the session's)", *config.sandbox_allow_write]
    show(
        "sandbox.allow_write",
        ", ".join(writable),
        config.origin.get("sandbox.allow_write", "built in"),
    )
    if config.sandbox_allow_domains:
        domains = ", ".join(config.sandbox_allow_domains)
        origin = config.origin.get("sandbox.allow_domains", "?")
        show("sandbox.allow_domains", f"{domains} (HTTPS through the sandbox's proxy)", origin)
    else:
        show("sandbox.network", "none", "built in (sandbox.allow_domains opens HTTPS to domains)")


def _show_web(config: EffectiveConfig, show: Callable[[str, Any, str], None]) -> None:
    """The ``web_fetch``/``web_search`` lines of ``coding-agent config``."""
    private = ", ".join(config.web_allow_private) or "none (public addresses only)"
    show(
        "web_fetch.allow_private", private, config.origin.get("web_fetch.allow_private", "default")
    )
    if config.sandbox_enabled:
        show("web_fetch.domains", "sandbox.allow_domains only", "sandbox.enabled")
    if config.web_search_backend is None:
        show(
            "web_search",
            "the model provider's own search only (Anthropic, OpenAI Responses, Gemini)",
            "default (set [web_search] backend to search with any model)",
        )
        return
    origin = config.origin.get("web_search.backend", "?")
    show("web_search.backend", config.web_search_backend, origin)
    if config.web_search_url:
        show("web_search.url", config.web_search_url, origin)
    from coding_agent.worker.tools.web_search import DEFAULT_KEY_ENV

    defaults = {str(name): key for name, key in DEFAULT_KEY_ENV.items()}
    variable = config.web_search_key_env or defaults.get(config.web_search_backend)
    if variable:
        state = "set" if os.environ.get(variable) else "NOT SET: web_search will fail"
        show("web_search.api_key_env", variable, f"environment ${variable}: {state}")


def _show_notifications(config: EffectiveConfig, show: Callable[[str, Any, str], None]) -> None:
    """The ``[notifications]`` lines of ``coding-agent config`` (one per channel)."""
    import shutil

    found = config.notifications
    origin = config.origin.get("notifications", "default")

    def events(names: tuple[str, ...]) -> str:
        return ", ".join(names) or "off"

    when = "also while the TUI has focus" if found.when_focused else "while the TUI is unfocused"
    show("notifications.terminal", f"{events(found.terminal)} ({found.terminal_style}, {when})",
         origin)  # fmt: skip
    desktop = "always" if found.desktop_when == "always" else "while no TUI is attached"
    if found.desktop and shutil.which("notify-send") is None:
        desktop += "; notify-send is not installed: nothing is shown"
    show("notifications.desktop", f"{events(found.desktop)} ({desktop})", origin)
    for name, target, names in (
        ("webhook", found.webhook, found.webhook_events),
        ("command", found.command, found.command_events),
    ):
        show(f"notifications.{name}", f"{target} ({events(names)})" if target else "off", origin)


def _warm_start(action: str) -> int:
    """``coding-agent warm-start status|stop``."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.cli.doctor import warm_start_state
    from coding_agent.settings import warm_start

    if action == "stop":
        pid = warm_start.stop()
        print(f"stopped the warm-start server (pid {pid})" if pid else "no warm-start server runs")
        return 0
    print(f"warm start: {warm_start_state()}")
    return 0


def _cwd() -> Path:
    try:
        cwd = Path(os.getcwd())
    except FileNotFoundError:
        raise _UsageError(
            "the current folder no longer exists (it was deleted): cd into a folder that exists"
        ) from None
    except OSError as error:
        raise _UsageError(f"cannot use the current folder: {error.strerror}") from None
    if not os.access(cwd, os.R_OK | os.X_OK):
        raise _UsageError(f"cannot read the current folder {cwd}: permission denied")
    return cwd


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it).

    A local headless run (``-p``/``--json``) keeps the cycle collector off from here to its
    first provider request, where the SDK client ends the pause (everything allocated until
    then lives as long as the process: see :mod:`coding_agent.worker.gc_policy`); every other
    command ends it once the command line is parsed, and every way out ends it."""
    pause_for_start_up()  # first: what follows allocates (activate reads the facets site)
    activate()  # the packages `facets add` installed (outside the environment uv sync manages)
    freeze_at_exit()  # the interpreter's exit need not collect the whole heap
    try:
        return _main(argv, lambda: start_up_done(freeze=False))
    finally:
        start_up_done(freeze=False)


_prebuilt: list[tuple[argparse.ArgumentParser, argparse.ArgumentParser]] = []
"""The parsers :func:`prebuild_parser` made, until the first :func:`main` takes them."""


def prebuild_parser() -> argparse.ArgumentParser:
    """Build the argument parsers now (:func:`build_parser`, :func:`build_headless_parser`), for
    this process's next :func:`main` (once; later calls of ``main`` build their own), and return
    the first. The warm start's fork server does, so each forked child parses its command line
    with parsers built before the fork (~4 ms less of its start); building one reads nothing but
    the code (no file, and the environment only for the terminal's width that argparse checks
    its formats against, which the parser does not keep)."""
    parser = build_parser()
    _prebuilt[:] = [(parser, build_headless_parser())]
    return parser


def parse_command_line(
    argv: Sequence[str] | None = None,
    parsers: tuple[argparse.ArgumentParser, argparse.ArgumentParser] | None = None,
) -> argparse.Namespace:
    """The parsed command line. A headless one (:func:`coding_agent.cli.argv.is_headless`) is
    parsed without subcommands, its prompt wherever it stands: ``args.prompt`` (``-p``) and
    ``args.json`` (``--json``) hold it, each ``None`` when its flag was not given, and
    ``args.command`` is ``None``. ``parsers``: :func:`build_parser`'s and
    :func:`build_headless_parser`'s (built here when not given)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser, headless = parsers if parsers is not None else (build_parser(), None)
    try:
        words = pi_words(words)  # pi's --mode json, --provider NAME --model ID
    except PiFlagError as error:
        parser.error(str(error))
    if not is_headless(words, subcommands=SUBCOMMANDS, takes_value=_value_options(parser)):
        return parser.parse_args(words)
    headless = headless or build_headless_parser()
    # after "--" every word is the prompt's (-p -- "-x means?"), which parse_intermixed_args
    # of Python 3.11 drops: they are kept apart
    end = words.index("--") if "--" in words else len(words)
    args = headless.parse_intermixed_args(split_wait_value(words[:end]))
    args.words = [*args.words, *words[end + 1 :]]
    given = [text for text in (args.prompt, args.json) if text] + list(args.words)
    files = [text for text in given if text.startswith("@") and not any(c.isspace() for c in text)]
    if files and len(given) - len(files) <= 1:  # pi's `-p @code.ts @test.ts "Review these"`
        given = [" ".join([*files, *(text for text in given if text not in files)])]
    if len(given) > 1:
        named = next((word for word in args.words if word in SUBCOMMANDS), None)
        if named is not None:
            headless.error(f"{named} does not take -p or --json")
        flags = " ".join(text.partition("=")[0] for text in given if text.startswith("--"))
        if claude_flag_hint(f"unrecognized arguments: {flags}"):  # --append-system-prompt="a b"
            headless.error(f"unrecognized arguments: {flags}")
        shown = ", ".join(repr(text if len(text) <= 30 else text[:27] + "...") for text in given)
        headless.error(
            f'one prompt, given {len(given)} ({shown}): quote it as one word (-p "fix the tests")'
        )
    prompt = given[0] if given else ""
    args.prompt = None if args.prompt is None else prompt
    args.json = None if args.json is None else prompt
    args.command = None
    delattr(args, "words")
    return args


def _value_options(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The options whose next word is their value (a word that is not a subcommand)."""
    return frozenset(
        option
        for action in parser._actions  # argparse has no public list of them
        if action.nargs in (None, "?", "+") and action.dest not in ("prompt", "json")
        for option in action.option_strings
    )


def _main(argv: Sequence[str] | None, start_up_done: Callable[[], None]) -> int:
    args = parse_command_line(argv, _prebuilt.pop() if _prebuilt else None)
    headless = (
        args.prompt is not None
        or args.json is not None
        or getattr(args, "input_format", None) == "stream-json"
    )
    local_tui = (
        not headless
        and args.command in (None, "attach")
        and not (getattr(args, "session", None) or "").startswith("tcp://")
    )
    if (not headless or args.server is not None) and not local_tui:
        start_up_done()  # a server, a remote run, a command: no first request of ours is next
    # A local TUI ends the pause once its first frame is painted (_run_tui): what it imports
    # and builds until then (Textual, chord, pico3, the app) lives as long as the process.
    if headless and args.command in SUBCOMMANDS:
        _usage_exit(f"{args.command} does not take -p or --json", args)
    if args.server is not None and (args.continue_ or args.resume is not None):
        _usage_exit("--server takes the session in its URL: --server tcp://HOST:PORT/SESSION", args)
    if args.wait_for_approval is not None and not headless and args.command != "serve":
        _usage_exit("--wait-for-approval is for -p/--json (a TUI asks you itself)", args)
    if args.server is not None and not headless:
        _usage_exit(
            "--server is for -p/--json (a TUI attaches with: attach tcp://HOST:PORT/SESSION)", args
        )
    _check_claude_output(args, headless)
    try:
        elsewhere = args.command in SUBCOMMANDS or getattr(args, "server", None) is not None
        check_session_flags(args, headless=headless, elsewhere=elsewhere)
    except ValueError as error:  # one line naming the flag
        _usage_exit(str(error), args)
    args.facets_dir = [str(Path(folder).resolve()) for folder in args.facets_dir]
    args.add_dir = _added_dirs(args)
    try:
        elsewhere = args.command in SUBCOMMANDS or getattr(args, "server", None) is not None
        args.run = run_flags(args, elsewhere=elsewhere)
    except ValueError as error:  # RunOptionsError: one line naming the flag
        _usage_exit(str(error), args)
    if args.faux_script is not None:
        args.faux_script = str(Path(args.faux_script).resolve())
    try:
        cwd = _cwd()
        if args.command == "config":
            return _print_config(cwd)
        if args.command == "doctor":
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.doctor import run_doctor

            return run_doctor(sys.stdout, sys.stderr)
        if args.command == "warm-start":
            return _warm_start(args.action)
        if args.command == "acp":
            # lazy: start-up time (the command line imports only what the chosen command runs)
            import anyio

            from coding_agent.acp.agent import run_acp

            return anyio.run(lambda: run_acp(model=args.model, faux_script=args.faux_script))
        if args.command == "serve":
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.server.main import run_serve

            return run_serve(args, cwd)
        if args.command == "web":
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.server.web_local import run_web

            return run_web(args, cwd)
        if args.command == "attach" and (args.session or "").startswith("tcp://"):
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.attach import run_remote_attach

            return run_remote_attach(args)
        if args.server is not None:
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.attach import run_remote_headless

            return run_remote_headless(args, _read_prompt(args, sys.stdin))
        if args.command == "db":
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.db import run_db_command

            return run_db_command(args)
        if args.command == "facets":
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.facets import run_facets_command

            return run_facets_command(args, cwd)
        if args.command in ("sessions", "export"):
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.sessions import run_session_command

            return run_session_command(args, cwd)
        if args.command == "import":
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.importing import run_import_command

            return run_import_command(args, cwd, resume_prefix())
        from coding_agent.session_files.folders import remove_session
        from coding_agent.settings.config import load_config
        from coding_agent.settings.trust import TrustStore

        TrustStore.default().load()  # a corrupt trust file stops us before a session is made
        files = load_config(cwd)  # an invalid config.toml too (the worker reads it again)
        if not args.models:  # pi's enabledModels (settings.pi_setup)
            args.models = files.model_scope
        if headless:  # the TUI shows them as notices (tui.main)
            for warning in files.warnings:  # what of pi's setup is not used (settings.pi_setup)
                print(f"coding-agent: warning: {warning}", file=sys.stderr)
        prompt = _read_prompt(args, sys.stdin) if headless else ""
        # a new session starts in the config's mode (or Claude Code's defaultMode: _run, once
        # the project's trust is decided); one resumed keeps its own
        args.explicit_mode = args.permission_mode is not None  # --permission-mode given
        args.mode_from_files = args.permission_mode is None and not (
            args.continue_ or args.resume is not None or args.command == "attach"
        )
        if args.mode_from_files and files.permission_mode is not None:
            args.permission_mode = files.permission_mode
            where = files.origin.get("permission_mode", "config.toml")
            args.mode_asked = f'permission_mode = "{files.permission_mode}" ({where})'
        session, new = _choose_session(args, cwd)
        if not new:  # a failure's result names it (one made here is removed on a failure)
            args.failed_session = session.id
        if args.name:
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.session_files.index import set_session_name

            set_session_name(session, args.name)
        try:
            code = _run(args, session, new, headless, prompt, start_up_done)
        except BaseException as error:
            if new and _start_failure(error):
                remove_session(session)  # a start that failed leaves no session behind
            raise
        if new and getattr(args, "unanswered", False):
            remove_session(session)  # the model never answered (unreachable, say): no ghost
        return code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BaseException as error:
        sole = _sole(error)
        if isinstance(sole, BrokenPipeError):  # stdout's reader left (| head): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_BROKEN_PIPE
        code = _known_code(sole) if isinstance(sole, Exception) else None
        session_id = getattr(args, "failed_session", "")
        if code is None:
            if isinstance(sole, Exception):  # a bug: its traceback follows; a script reads why
                _report_failure(args, f"internal error: {type(sole).__name__}: {sole}", session_id)
            raise
        message = str(sole)
        if type(sole).__name__ == "CorruptStorage":
            message += " (the file was left as it is)"
        if _names_a_file(sole):
            message = _file_problem(sole)
        print(f"coding-agent: error: {message}", file=sys.stderr)
        _report_failure(args, message, session_id)
        return code


def _run(
    args: argparse.Namespace,
    session: Session,
    new: bool,
    headless: bool,
    prompt: str,
    start_up_done: Callable[[], None],
) -> int:
    import anyio

    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.session_files.folders import update_settings
    from coding_agent.settings.trust import check_project

    project = check_project(session.cwd, decide=args.trust)
    if headless and not project.trusted:
        # lazy: start-up time (the command line imports only what the chosen command runs)
        from coding_agent.context.waiting import describe_waiting, waiting_for_trust

        waiting = [] if project.problem is not None else waiting_for_trust(project.root)
        marked = " (marked untrusted)" if project.decision is not None else ""
        warning = (
            f"this project's own setup waits for --trust{marked}: {describe_waiting(waiting)}"
            if waiting
            else project.warning("--trust")
        )
        if warning is not None:
            print(f"coding-agent: warning: {warning}", file=sys.stderr)
    if getattr(args, "mode_from_files", False):
        # lazy: start-up time (the command line imports only what the chosen command runs)
        from coding_agent.settings.permissions import starting_mode

        # Claude Code's permissions.defaultMode (settings.claude_settings)
        args.permission_mode = starting_mode(session.cwd, args.permission_mode)
    if args.permission_mode == "auto":  # Claude Code's disableBypassPermissionsMode refuses it
        # lazy: start-up time (the command line imports only what the chosen command runs)
        from coding_agent.settings.claude_settings import auto_disabled
        from coding_agent.settings.permissions import PermissionFiles

        asked = getattr(args, "mode_asked", "--permission-mode auto")
        refused = auto_disabled(PermissionFiles(session.cwd).restrictions(), asked)
        if refused is not None:
            raise _UsageError(refused)
    if headless and getattr(args, "approve", "deny") == "allow":
        # --approve allow says yes to every call that would ask, as auto does (more: credentials
        # and guarded files too), so the switch that disables auto refuses it as well
        # lazy: start-up time (the command line imports only what the chosen command runs)
        from coding_agent.settings.claude_settings import approve_allow_disabled
        from coding_agent.settings.permissions import PermissionFiles

        refused = approve_allow_disabled(PermissionFiles(session.cwd).restrictions())
        if refused is not None:
            raise _UsageError(refused)
    run_mode = _settings_mode(args, session)  # a refusal before anything is recorded
    previous: LaunchSettings | None = None
    if args.command != "attach":
        previous = session.settings
        session = update_settings(session, _launch_settings(args, previous))
    if run_mode is not None:  # after the launch settings: --settings is this run's alone
        args.permission_mode, asked = run_mode
        print(f"coding-agent: permission mode {args.permission_mode} ({asked})", file=sys.stderr)
    tui_dirs = [*session.settings.facets_dirs, *(str(d) for d in project.loaded_dirs)]
    try:
        if headless:
            # lazy: start-up time (the command line imports only what the chosen command runs)
            from coding_agent.cli.interrupt import Interrupt, until_interrupted

            interrupt = Interrupt()
            run = (_run_headless, args, session, prompt, interrupt)
            return int(anyio.run(until_interrupted, interrupt, *run))
        return int(anyio.run(_run_tui, args, session, tui_dirs, start_up_done, not new))
    except BaseException as error:
        if previous is not None and not new and _start_failure(error):
            update_settings(session, previous)  # a start that failed records nothing
        raise


def _settings_mode(args: argparse.Namespace, session: Session) -> tuple[str, str] | None:
    """``--settings``' ``permissions.defaultMode`` (Claude Code's: ``default``, ``acceptEdits``,
    ``plan``, ``bypassPermissions``…) is this run's permission mode unless ``--permission-mode``
    was given, which wins as it does in Claude Code. It is applied as that flag's value is: the
    worker makes it the session's mode before anything runs, and the session keeps it (a mode
    is the session's here, Claude Code has none to keep), though it is not recorded in the
    launch settings; never silently: :func:`_run` writes one ``coding-agent: permission mode``
    line on stderr naming it, the file, and that the session keeps it. ``bypassPermissions``
    is ``auto``, behind ``--permission-mode auto``'s gates: ``permissions.
    disableBypassPermissionsMode`` in any settings file (the ``--settings`` file's own
    included) refuses it with a usage error here, and the approval feature's ``set_mode``
    refuses it again in the worker. Returns ``(the mode, the words naming where it comes
    from)``, or ``None``."""
    if getattr(args, "explicit_mode", False) or args.run is None or args.run.settings is None:
        return None
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.settings.claude_settings import auto_disabled, flag_mode
    from coding_agent.settings.permissions import PermissionFiles

    options = args.run.resolve()
    assert options.settings is not None
    found = flag_mode(options.settings)
    if found is None:  # not a mode this agent takes: the worker's note says so
        return None
    mode, value = found
    source = options.settings_source
    where = source if source.startswith("--settings") else f"--settings {source}"
    asked = f"permissions.defaultMode {value!r} of {where}"
    if mode == "auto":
        files = PermissionFiles(session.cwd)
        files.set_run_settings(options.settings_source, options.settings)
        refused = auto_disabled(files.restrictions(), asked)
        if refused is not None:
            raise _UsageError(refused)
    return mode, f"from {asked}; the session keeps it, as with --permission-mode"


def _start_failure(error: BaseException) -> bool:
    """Whether ``error`` stopped the session from starting (nothing of the user's is in it)."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.worker.main import WorkerBusy

    error = _sole(error)
    if isinstance(error, WorkerBusy):
        return False  # someone else's session: leave it alone
    return isinstance(error, Exception) and _known_code(error) is not None


def _known_code(error: Exception) -> int | None:
    """The exit status of an error the user can fix (``None``: a bug, shown as a traceback)."""
    from chord import FacetDiscoveryError

    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.session_files.folders import SessionError
    from coding_agent.settings.config import ConfigError
    from coding_agent.settings.model_config import RegistryError, UnknownModel
    from coding_agent.settings.trust import TrustError
    from pico3 import CorruptStorage

    if isinstance(error, UnknownModel):
        return EXIT_USAGE  # a typo in --model or model =: the message lists the models
    if isinstance(error, RegistryError):
        return EXIT_FAILED
    if isinstance(error, CorruptStorage):
        return EXIT_USAGE  # names the file and the line; the file is left as it is
    if isinstance(error, (_UsageError, SessionError, TrustError, ConfigError, FacetDiscoveryError)):
        return EXIT_USAGE
    if isinstance(error, _Failure):
        return EXIT_FAILED
    if isinstance(error, ValueError):  # a bad faux script, --permission-mode without approval
        return EXIT_USAGE
    if _names_a_file(error):
        return EXIT_FAILED  # a folder it cannot write, a disk full: _file_problem says which
    return None


def _names_a_file(error: BaseException) -> TypeGuard[OSError]:
    """Whether ``error`` is an :class:`OSError` naming a path (not a descriptor number, which
    ``os.stat(fd)`` and the like put in ``filename``)."""
    return isinstance(error, OSError) and isinstance(error.filename, (str, bytes))


def _file_problem(error: OSError) -> str:
    """One line for a file the agent could not read or write: what, where, and, for its own
    state folder (a read-only home, a command in the sandbox running the agent), the fix."""
    from coding_agent.settings.xdg import state_home

    line = f"{error.strerror or error}: {error.filename}"
    state = state_home()
    if Path(os.fsdecode(error.filename)).is_relative_to(state):
        line += (
            f" (the agent keeps its sessions under {state}/coding-agent: make it writable, or "
            "set XDG_STATE_HOME to a folder that is)"
        )
    return line


def _sole(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
