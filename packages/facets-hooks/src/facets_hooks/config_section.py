"""The ``hooks`` section of ``coding-agent config``: the hooks a session loads, read by the
loader the session uses (:func:`.settings.load_hooks`), so the listing cannot disagree with it.

The app's ``config`` command hosts the ``"config"`` facets of every feature beside a local
service ``config.sections`` (joined by id only: a feature never imports the app). Its
``services()`` are the harness services a session's features read at start (project, trust,
the Claude Code plugins, ``mcp_env``); ``add(section)`` takes one section as JSON::

    {"title": "hooks",
     "items": [{"name": "PreToolUse Bash: ./guard.sh", "source": "/home/me/.claude/settings.json",
                "state": "loaded"}],
     "problems": ["/home/me/.claude/settings.json: ... (the fix)"]}

Nothing is run: an untrusted project's hooks are read (as text, by the same parser) only to be
listed with the state ``waiting for /trust``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from chord import Facet, FacetEnvironment, define_facet, define_service

from .on_failure import BLOCK
from .settings import HookSpec, load_hooks, parse_settings, settings_files

__all__ = ["CONFIG_SECTIONS", "config_facet", "hooks_section"]


class ConfigSections(Protocol):
    """The app's ``config.sections`` service (module docstring)."""

    def services(self) -> Mapping[str, Any]: ...

    def add(self, section: dict[str, Any]) -> None: ...


CONFIG_SECTIONS = define_service("config.sections", ConfigSections, local=True)
"""The ``coding-agent config`` command's local service, by id (module docstring)."""

WAITING = "waiting for /trust"


def _item(hook: HookSpec, state: str) -> dict[str, str]:
    matcher = f" {hook.matcher}" if hook.matcher else ""
    blocks = " (onFailure: block)" if hook.on_failure == BLOCK else ""
    name = f"{hook.event}{matcher}: {hook.label}{blocks}"
    return {"name": name, "source": hook.source, "state": state}


def hooks_section(services: Mapping[str, Any]) -> dict[str, Any]:
    """The section for the session ``services`` describe: each loaded hook (event, matcher,
    command, file), each hook of an untrusted project's settings as waiting for ``/trust``,
    and the problems the session would warn about."""
    project = services.get("project_root") or services.get("workspace")
    trusted = bool(services.get("project_trusted", False))
    env = services.get("mcp_env")
    environ: Mapping[str, str] = os.environ if env is None else env
    loaded = load_hooks(
        env=environ,
        project=project,
        project_trusted=trusted,
        plugins=services.get("claude_plugins"),
    )
    items = [_item(hook, "loaded") for hook in loaded.hooks]
    problems = list(loaded.problems)
    _, waiting = settings_files(environ, project, trusted)
    for path in waiting:
        if str(path) not in loaded.waiting:
            continue  # no hooks in it
        specs = _unread(path)
        items += [_item(hook, WAITING) for hook in specs] or [
            {"name": "its hooks (the file does not parse)", "source": str(path), "state": WAITING}
        ]
    return {"title": "hooks", "items": items, "problems": problems}


def _unread(path: Path) -> list[HookSpec]:
    """The hooks of an untrusted project's settings file, parsed (never run) for the listing."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    return parse_settings(data, str(path))[0]


def _setup(env: FacetEnvironment) -> None:
    sections = env.use(CONFIG_SECTIONS)
    env.on_activate(lambda: sections.add(hooks_section(sections.services())))


config_facet: Facet = define_facet("facets-hooks/config", _setup)
"""The ``"config"`` host's facet: adds the ``hooks`` section (module docstring)."""
