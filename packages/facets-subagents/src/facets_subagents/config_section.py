"""The ``agents`` section of ``coding-agent config``: the subagent definitions a session loads,
read by the loader the session uses (:func:`.definitions.load_definitions`), so the listing
cannot disagree with it.

The app's ``config`` command hosts the ``"config"`` facets of every feature beside a local
service ``config.sections`` (joined by id only: a feature never imports the app). Its
``services()`` are the harness services a session's features read at start; ``add(section)``
takes one section as JSON: ``{"title", "items": [{"name", "source", "state"}], "problems"}``.
An agent another of the same name replaces is listed as ``shadowed by FILE``; an untrusted
project's agent folders as ``waiting for /trust`` (not read).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from chord import Facet, FacetEnvironment, define_facet, define_service

from .definitions import load_definitions, plugin_agent_paths

__all__ = ["CONFIG_SECTIONS", "agents_section", "config_facet"]


class ConfigSections(Protocol):
    """The app's ``config.sections`` service (module docstring)."""

    def services(self) -> Mapping[str, Any]: ...

    def add(self, section: dict[str, Any]) -> None: ...


CONFIG_SECTIONS = define_service("config.sections", ConfigSections, local=True)
"""The ``coding-agent config`` command's local service, by id (module docstring)."""


def agents_section(services: Mapping[str, Any]) -> dict[str, Any]:
    """The section for the session ``services`` describe: each agent (name, file), each one
    shadowed by another of its name, the untrusted project's agent folders, and the files
    skipped or loaded with a note, as the session warns."""
    project = services.get("project_root") or services.get("workspace")
    env = services.get("mcp_env")
    found = load_definitions(
        project=project,
        project_trusted=bool(services.get("project_trusted", False)),
        env=os.environ if env is None else env,
        plugin_agents=plugin_agent_paths(services.get("claude_plugins")),
    )
    items = [{"name": d.name, "source": d.source, "state": "loaded"} for d in found.agents.values()]
    items += [
        {"name": d.name, "source": d.source, "state": f"shadowed by {winner}"}
        for d, winner in found.shadowed
    ]
    items += [
        {
            "name": f"{w.count} agent file{'' if w.count == 1 else 's'}",
            "source": str(Path(str(project)) / w.folder),
            "state": "waiting for /trust",
        }
        for w in found.waiting
    ]
    return {"title": "agents", "items": items, "problems": [*found.errors, *found.warnings]}


def _setup(env: FacetEnvironment) -> None:
    sections = env.use(CONFIG_SECTIONS)
    env.on_activate(lambda: sections.add(agents_section(sections.services())))


config_facet: Facet = define_facet("facets-subagents/config", _setup)
"""The ``"config"`` host's facet: adds the ``agents`` section (module docstring)."""
