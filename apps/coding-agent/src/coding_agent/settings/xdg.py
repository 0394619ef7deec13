"""Where the agent keeps its files: the XDG config and state homes (the XDG Base Directory spec).

``config_home()/coding-agent/`` holds what the user writes (config.toml, trust.json,
keybindings.toml); ``state_home()/coding-agent/`` holds what the agent writes (sessions, the
server's folder, MCP tokens). Both read the environment given (a session's, in the worker) or
``os.environ``, and fall back to the spec's defaults when the variable is unset or relative.
:func:`claude_home` is Claude Code's user folder, whose agents, commands, skills, memory and
settings the agent reads too (:func:`claude_project_folder`: its folder for one project, holding
the project's sessions and auto memory); :func:`pi_home` is pi's (its skills, prompts, memory, system
files, settings and models).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "PI_AGENT_DIR_ENV",
    "claude_home",
    "claude_project_folder",
    "config_home",
    "pi_home",
    "state_home",
]

PI_AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
"""The variable that moves pi's folder (default ``~/.pi/agent``), as pi reads it."""


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


def claude_project_folder(
    folder: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> Path:
    """Claude Code's folder for the project or working folder ``folder`` (absolute):
    ``~/.claude/projects/<folder, every character but letters and digits as ->`` (its session
    files, and ``memory/``, its auto memory)."""
    return claude_home(env) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(folder))


def pi_home(env: Mapping[str, str] | None = None) -> Path:
    """pi's folder: ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``."""
    environ = os.environ if env is None else env
    configured = environ.get(PI_AGENT_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".pi" / "agent"
