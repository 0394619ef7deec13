"""Claude Code's command-line spellings: what a ``claude -p …`` script says, here.

A Claude Code user's scripts and muscle memory bring its flags (``--output-format json``,
``--dangerously-skip-permissions``, ``--allowedTools``…). ``--output-format`` and ``--max-turns``
are this command line's own too, with Claude Code's shapes and meaning
(:mod:`coding_agent.cli.claude_output`). The permission modes that mean the same
here are taken as they are (:func:`permission_mode`: ``--permission-mode acceptEdits`` is
``accept-edits``, ``default`` is ``ask``), and so are the run-scoped flags ``--allowedTools``,
``--disallowedTools``, ``--system-prompt``, ``--append-system-prompt`` (and their ``-file``
forms), ``--mcp-config``, ``--strict-mcp-config``, ``--settings``, ``--agents`` and ``--tools``
(:mod:`coding_agent.settings.run_options`), the session flags ``--session-id``,
``--fork-session`` and ``--fallback-model`` (:func:`add_session_flags`), and the Agent SDK's
``--input-format stream-json`` with ``--permission-prompt-tool stdio``
(:mod:`coding_agent.cli.claude_control`); every other flag of
Claude Code's that this command line does not take keeps argparse's usage error (exit 2, nothing runs), with what to write here
instead (:func:`claude_flag_hint`): never a silent translation into something that behaves
differently, such as another JSON shape or more authority than the user typed. A call ``-p``
refuses for want of approval names the ``--allowedTools`` rule that would run it
(:func:`allow_rule`), the narrowest fix a ``claude -p`` script knows.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coding_agent.settings.run_options import RunFlags

__all__ = [
    "CLAUDE_FLAGS",
    "CLAUDE_MODES",
    "add_run_flags",
    "add_session_flags",
    "allow_rule",
    "check_session_flags",
    "claude_flag_hint",
    "permission_mode",
    "run_flags",
]

CLAUDE_MODES = {"default": "ask", "acceptEdits": "accept-edits", "plan": "plan"}
"""Claude Code's ``--permission-mode`` values that are one of this agent's modes."""

_MODE_HINTS = {
    "bypassPermissions": "Claude Code's bypassPermissions is --permission-mode auto here "
    "(every call runs unasked)",
    "dontAsk": "Claude Code's dontAsk is permissions.denyInsteadOfPrompting: true in "
    "~/.claude/settings.json here",
    "auto": "",  # ours: never reaches the hint
}

CLAUDE_FLAGS: dict[str, str] = {
    "--dangerously-skip-permissions": "--permission-mode auto (every call runs unasked)",
    "--allow-dangerously-skip-permissions": "--permission-mode auto (every call runs unasked)",
    "--max-budget-usd": "no counterpart: --max-turns N caps the run (the result's "
    "total_cost_usd says what it cost)",
    "--json-schema": "no counterpart: ask for the JSON in the prompt and read it from .result "
    "(there is no structured_output)",
    "--no-session-persistence": "no counterpart: every session is stored (delete one in the "
    "coding-agent sessions picker)",
    "--bare": "no counterpart: --strict-mcp-config leaves the configured MCP servers out and "
    "--system-prompt replaces the base prompt",
    "--setting-sources": "no counterpart: your settings and a trusted project's are read; "
    "--settings adds one more file",
}
"""Claude Code's flags this command line does not take, each with what to write here."""


_PROMPT_HINT = (
    'a prompt needs -p here: coding-agent -p "PROMPT" (Claude Code\'s claude "PROMPT" opens its '
    "TUI with it; this TUI starts without one)"
)
"""A word where a subcommand stands (``coding-agent "fix the tests"``): a prompt without ``-p``."""


def permission_mode(value: str) -> str:
    """``--permission-mode``'s value with Claude Code's names of the same modes mapped to ours
    (:data:`CLAUDE_MODES`); anything else is left for argparse's choices to judge."""
    return CLAUDE_MODES.get(value, value)


def claude_flag_hint(message: str) -> str | None:
    """What to write instead of the Claude Code flags argparse's ``message`` refuses (an
    unrecognized argument, or a Claude Code mode it does not take), or ``None``."""
    if message.startswith("argument {") and "invalid choice:" in message:
        return _PROMPT_HINT
    if "--permission-mode" in message:
        hints = [hint for mode, hint in _MODE_HINTS.items() if hint and f"'{mode}'" in message]
        return hints[0] if hints else None
    if "unrecognized arguments:" not in message:
        return None
    words = message.partition("unrecognized arguments:")[2].split()
    hints = [
        f"{name} is Claude Code's flag, here: {CLAUDE_FLAGS[name]}"
        for name in dict.fromkeys(word.partition("=")[0] for word in words)
        if name in CLAUDE_FLAGS
    ]
    return "; ".join(hints) or None


_PLAIN_COMMAND = re.compile(r"[\w./,@+-]+(?: [\w./=,@+-]+)*")
"""A command an exact ``Bash(...)`` rule can name: words of letters, digits and path signs,
one space between, nothing the shell reads (quotes, ``;``, ``|``, ``$``, globs, parentheses),
and no ``NAME=value`` before the program (a rule names the program, not its environment)."""


def allow_rule(tool: str, arguments: object) -> str | None:
    """The ``--allowedTools`` rule that lets this one call of our ``tool`` run unasked in
    ``-p``, as a blocked call's hint names it: ``Bash(npm test)`` for a plain command (exactly
    it), Claude Code's tool name for another tool it has (``Write``: every write), an MCP tool's
    own name; ``None`` where no rule says it well (a compound or quoted command, a tool Claude
    Code has no name for)."""
    # lazy: the command line imports pico3 only when a run needs it
    from pico3 import claude_code_names

    if tool == "bash":
        command = arguments.get("command") if isinstance(arguments, dict) else None
        if isinstance(command, str) and len(command) <= 80 and _PLAIN_COMMAND.fullmatch(command):
            return f"Bash({command})"
        return None
    if tool.startswith("mcp__"):
        return tool
    names = claude_code_names(tool)
    return names[0] if names else None


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """Claude Code's run-scoped flags (:mod:`coding_agent.settings.run_options`): this run only,
    never stored."""
    for flags, dest, kind in (
        (("--allowedTools", "--allowed-tools"), "allowed_tools", "allow"),
        (("--disallowedTools", "--disallowed-tools"), "disallowed_tools", "deny"),
    ):
        parser.add_argument(
            *flags,
            dest=dest,
            nargs="+",
            action="extend",
            default=[],
            metavar="RULE",
            help=f"{kind} rules for this run only (Bash(npm test:*), Edit, mcp__github; "
            "separate words, or commas/spaces in one), listed by /permissions as 'command line'",
        )
    parser.add_argument(
        "--system-prompt",
        metavar="TEXT",
        help="this run's system prompt (replaces the base one and SYSTEM.md)",
    )
    parser.add_argument("--system-prompt-file", metavar="FILE", help="--system-prompt from FILE")
    parser.add_argument(
        "--append-system-prompt",
        metavar="TEXT",
        help="text added after the system prompt (after APPEND_SYSTEM.md's), this run only",
    )
    parser.add_argument(
        "--append-system-prompt-file", metavar="FILE", help="--append-system-prompt from FILE"
    )
    parser.add_argument(
        "--mcp-config",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE_OR_JSON",
        help='MCP servers for this run ({"mcpServers": {...}}, a file or the JSON itself); they '
        "start without the project's approval",
    )
    parser.add_argument(
        "--strict-mcp-config",
        action="store_true",
        help="only the servers of --mcp-config (no configured ones)",
    )
    parser.add_argument(
        "--settings",
        metavar="FILE_OR_JSON",
        help="one more Claude Code settings file for this run (a file or the JSON itself): its "
        "permission rules and hooks apply as your ~/.claude/settings.json's do",
    )
    parser.add_argument(
        "--agents",
        metavar="JSON",
        help='subagents for this run: {"name": {"description": ..., "prompt": ..., "tools": '
        '[...], "model": ...}}',
    )
    parser.add_argument(
        "--tools",
        metavar="TOOLS",
        help='the built-in tools the model is offered this run ("Bash,Edit,Read"; "" none, '
        "default all); --allowedTools decides which of them run unasked",
    )


def add_session_flags(parser: argparse.ArgumentParser) -> None:
    """Claude Code's ``--session-id``, ``--fork-session`` and ``--fallback-model``
    (:mod:`coding_agent.session_files.forks`, :mod:`coding_agent.worker.fallback`)."""
    parser.add_argument(
        "--session-id",
        metavar="UUID",
        help='the new session\'s id, a UUID (id=$(uuidgen); ... --session-id "$id"; then '
        '--resume "$id"); an id that exists is refused',
    )
    parser.add_argument(
        "--fork-session",
        action="store_true",
        help="with --resume/--continue: run in a new session that starts as a copy of that one "
        "(which is left as it was); with --session-id, the fork's id",
    )
    parser.add_argument(
        "--fallback-model",
        metavar="PROVIDER/ID",
        help="-p: when the model is overloaded or unavailable (HTTP 529/503), retry on this "
        "model once and go on with it",
    )


def check_session_flags(args: argparse.Namespace, *, headless: bool, elsewhere: bool) -> None:
    """Check ``--session-id``, ``--fork-session`` and ``--fallback-model`` against the rest of
    ``args`` (``--session-id`` made a lower-case session id); raises :class:`ValueError` with
    the one line that says what is wrong. ``elsewhere``: the command starts no session here."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.session_files.forks import uuid_session_id

    resumes = args.continue_ or args.resume is not None
    given = [
        flag
        for flag, value in (
            ("--session-id", args.session_id),
            ("--fork-session", args.fork_session),
            ("--fallback-model", args.fallback_model),
        )
        if value
    ]
    if given and elsewhere:
        raise ValueError(
            f"{', '.join(given)}: for a session started here (the TUI, -p, --continue, --resume)"
        )
    if args.session_id is not None:
        args.session_id = uuid_session_id(args.session_id)
        if resumes and not args.fork_session:
            raise ValueError(
                "--session-id names a new session: with --resume or --continue it needs "
                "--fork-session (the fork gets the id), or resume that id with --resume ID"
            )
    if args.fork_session and not resumes:
        raise ValueError("--fork-session forks the session of --resume ID or --continue")
    if args.fallback_model is not None:
        if not headless:
            raise ValueError('--fallback-model is for a headless run: -p "PROMPT" ...')
        if getattr(args, "wait_for_approval", None) is not None:
            raise ValueError(
                "--fallback-model switches the model in this process, and with "
                "--wait-for-approval a worker of its own runs the turn: leave one of the two out"
            )
        if args.fallback_model == args.model:
            raise ValueError(
                "--fallback-model is the same model as --model: name another one to fall back on"
            )


_RUN_DESTS = (
    "allowed_tools",
    "disallowed_tools",
    "system_prompt",
    "system_prompt_file",
    "append_system_prompt",
    "append_system_prompt_file",
    "mcp_config",
    "strict_mcp_config",
    "settings",
    "agents",
    "tools",
)


def run_flags(args: argparse.Namespace, *, elsewhere: bool) -> RunFlags | None:
    """The run-scoped flags of ``args`` (files made absolute), checked (``None``: none given).
    Raises :class:`~coding_agent.settings.run_options.RunOptionsError` (a usage error, one
    line) for what cannot be read, or when ``elsewhere``: the command starts no session here."""
    if not any(getattr(args, name, None) not in (None, [], False) for name in _RUN_DESTS):
        return None
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.settings.run_options import RunFlags, RunOptionsError, split_rules

    def absolute(file: str | None) -> str | None:
        return None if file is None else str(Path(file).expanduser().resolve())

    flags = RunFlags(
        allowed=split_rules(args.allowed_tools),
        disallowed=split_rules(args.disallowed_tools),
        system_prompt=args.system_prompt,
        system_prompt_file=absolute(args.system_prompt_file),
        append_system_prompt=args.append_system_prompt,
        append_system_prompt_file=absolute(args.append_system_prompt_file),
        mcp_config=tuple(
            value if value.lstrip().startswith("{") else str(absolute(value))
            for value in args.mcp_config
        ),
        strict_mcp_config=args.strict_mcp_config,
        settings=args.settings
        if args.settings is None or args.settings.lstrip().startswith("{")
        else absolute(args.settings),
        agents=args.agents,
        tools=args.tools,
    )
    if elsewhere:
        raise RunOptionsError(
            f"{', '.join(flags.names())}: for a session started here (the TUI, -p, --json, "
            "--continue, --resume), this run only"
        )
    flags = flags.pin()  # every worker of the run reads the files as they are now, or refuses
    flags.resolve()
    return flags
