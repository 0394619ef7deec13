"""Where the agent keeps its files: the XDG config and state homes (the XDG Base Directory spec).

``config_home()/coding-agent/`` holds what the user writes (config.toml, trust.json,
keybindings.toml); ``state_home()/coding-agent/`` holds what the agent writes (sessions, the
server's folder, MCP tokens). Both read the environment given (a session's, in the worker) or
``os.environ``, and fall back to the spec's defaults when the variable is unset or relative.
:func:`claude_home` is Claude Code's user folder, whose agents, commands, skills, memory and
settings the agent reads too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["claude_home", "config_home", "state_home"]


def config_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME``, or ``~/.config`` when unset or not absolute (XDG spec)."""
    return _home(env, "XDG_CONFIG_HOME", ".config")


def state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME``, or ``~/.local/state`` when unset or not absolute (XDG spec)."""
    return _home(env, "XDG_STATE_HOME", ".local/state")


def _home(env: Mapping[str, str] | None, variable: str, default: str) -> Path:
    environ = os.environ if env is None else env
    value = environ.get(variable, "")
    if value and os.path.isabs(value):
        return Path(value)
    return Path(os.path.expanduser("~")) / default


def claude_home(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's user folder: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    environ = os.environ if env is None else env
    configured = environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser()
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"
