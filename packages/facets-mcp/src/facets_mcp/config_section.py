"""The ``mcp`` section of ``coding-agent config``: the MCP servers a session starts, read by
the loader the session uses (:func:`.config.load_config`), so the listing cannot disagree with
it. No server is started.

The app's ``config`` command hosts the ``"config"`` facets of every feature beside a local
service ``config.sections`` (joined by id only: a feature never imports the app). Its
``services()`` are the harness services a session's features read at start (project, trust, the
project's approved servers, the Claude Code plugins); ``add(section)`` takes one section as JSON:
``{"title", "items": [{"name", "source", "state"}], "problems"}``. A server is ``enabled``
(started by a session); an untrusted project's ``.mcp.json`` servers are listed as ``waiting
for /trust``, and a trusted project's servers not approved as written are problems, each with
what to do, as the session warns.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol

from chord import Facet, FacetEnvironment, define_facet, define_service

from .config import load_config, project_config_path

__all__ = ["CONFIG_SECTIONS", "config_facet", "mcp_section"]


class ConfigSections(Protocol):
    """The app's ``config.sections`` service (module docstring)."""

    def services(self) -> Mapping[str, Any]: ...

    def add(self, section: dict[str, Any]) -> None: ...


CONFIG_SECTIONS = define_service("config.sections", ConfigSections, local=True)
"""The ``coding-agent config`` command's local service, by id (module docstring)."""


def mcp_section(services: Mapping[str, Any]) -> dict[str, Any]:
    """The section for the session ``services`` describe (module docstring)."""
    workspace = services.get("workspace")
    project = services.get("project_root") or workspace
    trusted = bool(services.get("project_trusted", False))
    env = services.get("mcp_env")
    environ: Mapping[str, str] = os.environ if env is None else env
    config = load_config(
        project=project,
        project_trusted=trusted,
        project_approved=services.get("project_mcp_approved"),
        env=environ,
        cwd=workspace,
        plugins=services.get("claude_plugins"),
    )
    items = [
        {"name": f"{spec.name} ({spec.transport})", "source": spec.source, "state": "enabled"}
        for spec in config.servers
    ]
    problems = list(config.errors)
    if project is not None and not trusted and project_config_path(project).is_file():
        # the project's file parsed as a trusted one's would be, only to name its servers
        path = str(project_config_path(project))
        held = load_config(project=project, project_trusted=True, env=environ, cwd=workspace)
        items += [
            {"name": f"{spec.name} ({spec.transport})", "source": spec.source,
             "state": "waiting for /trust"}
            for spec in held.servers
            if spec.source == path
        ]  # fmt: skip
    return {"title": "mcp", "items": items, "problems": problems}


def _setup(env: FacetEnvironment) -> None:
    sections = env.use(CONFIG_SECTIONS)
    env.on_activate(lambda: sections.add(mcp_section(sections.services())))


config_facet: Facet = define_facet("facets-mcp/config", _setup)
"""The ``"config"`` host's facet: adds the ``mcp`` section (module docstring)."""
