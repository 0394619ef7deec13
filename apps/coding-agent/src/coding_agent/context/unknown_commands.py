"""What to say about a slash command nobody registered: the closest names, and for the commands
Claude Code and pi users type from habit (``/clear``, ``/exit``, ``/status``, ``/login``…) what
does that job here.

The TUI's "Unknown command" toast and ``-p``'s unknown-command error both name the closest
commands (:func:`close_names`); the TUI adds the equivalent of a habitual name
(:data:`EQUIVALENTS`, :func:`unknown_command_message`), so typing ``/clear`` says that ``/new``
starts a fresh context rather than only that ``/clear`` is unknown.

A name that is the untrusted project's own command (``/test`` of ``.claude/commands/test.md``:
:func:`~coding_agent.context.waiting.waiting_command`) is no typo: both say that it loads once
the project is trusted (:func:`waiting_message`) instead of naming the closest commands.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["EQUIVALENTS", "close_names", "unknown_command_message", "waiting_message"]

EQUIVALENTS: dict[str, str] = {
    "clear": "/new starts a fresh context (Claude Code's /clear)",
    "reset": "/new starts a fresh context",
    "exit": "/quit leaves (the session keeps running; /stop ends it)",
    "status": "the footer shows the model, folder, session id, tokens and context used; "
    "/cost the tokens and cost, /context the context window",
    "session": "the footer shows the model, folder and session id; /sessions lists this "
    "folder's sessions",
    "usage": "/cost shows this branch's tokens and cost",
    "config": "run `coding-agent config` in a shell: the effective settings and their files",
    "settings": "run `coding-agent config` in a shell: the effective settings and their files",
    "memory": "CLAUDE.md and AGENTS.md files are read at the start; /context lists the ones in "
    "use (edit them in your editor)",
    "init": "there is no /init: ask the model to write an AGENTS.md for this project",
    "doctor": "run `coding-agent doctor` in a shell",
    "login": "there is no login: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or another "
    "provider's key, /model lists them) and start coding-agent again",
    "logout": "there is no login: unset the provider's key variable",
    "hotkeys": "/help (F1) lists the commands and keys",
    "keybindings": "/help (F1) lists the commands and keys",
    "ide": "run `coding-agent acp` from your editor (Zed, Neovim: the Agent Client Protocol)",
}
"""Claude Code's and pi's command names that are not commands here, each with what to use
instead (shown after ``Unknown command /NAME:``)."""


def close_names(name: str, names: Iterable[str]) -> list[str]:
    """Up to three of ``names`` closest to the mistyped ``name`` (``modle`` → ``model``),
    closest first; none when nothing is close."""
    return difflib.get_close_matches(name, list(names), n=3, cutoff=0.5)


def waiting_message(name: str, place: str, trust: str = "/trust") -> str:
    """What to say about ``/name`` when the untrusted project's ``place`` (its file) defines
    it: it is the project's command and loads after ``trust`` (the TUI's ``/trust``; ``-p``
    names ``--trust``)."""
    return (
        f"/{name} is this project's command ({place}); it loads after {trust}: the project is "
        "not trusted yet, so its commands are not read"
    )


def unknown_command_message(name: str, names: Iterable[str], waiting: str | None = None) -> str:
    """The TUI's toast for ``/name`` when no command of ``names`` has that name: that it is the
    untrusted project's command when ``waiting`` names its file (:func:`waiting_message`), else
    what does its job here (a Claude Code or pi habit), else the closest commands, and the
    ``//`` escape that sends text starting with ``/``."""
    if waiting is not None:
        return waiting_message(name, waiting)
    head = f"Unknown command /{name}"
    equivalent = EQUIVALENTS.get(name.lower())
    if equivalent is not None:
        return f"{head}: {equivalent}"
    close = close_names(name, names)
    hint = f"; did you mean {', '.join(f'/{n}' for n in close)}?" if close else ""
    return f"{head}{hint} — type // to send text starting with /"
