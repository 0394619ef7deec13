"""The harness services that tell the features which project they are in and whether it is
trusted: one function, :func:`project_services`, used by the session worker (the services a
session's features read at start) and by ``coding-agent config`` (the same services handed to
the features' listing facets), so the two can never disagree about what a project loads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from coding_agent.settings.claude_plugins import enabled_plugins
from coding_agent.settings.trust import (
    TrustError,
    TrustStore,
    check_project,
    check_project_servers,
)
from coding_agent.settings.xdg import claude_home

__all__ = ["project_services"]

_log = logging.getLogger("coding_agent.worker")


def project_services(cwd: str | os.PathLike[str], env: Mapping[str, str] | None) -> dict[str, Any]:
    """``project_root`` and ``project_trusted`` for features that read project files only in a
    trusted project (facets-mcp's ``.mcp.json``, facets-subagents' agent definitions), and
    ``project_mcp_approved``, the project's MCP servers the user approved as they are written
    (none when the approvals cannot be read), ``claude_plugins``, the Claude Code plugins
    enabled for this project (:func:`~coding_agent.settings.claude_plugins.enabled_plugins`:
    the features read their parts); with ``env``, ``mcp_env`` too (where the user's
    configuration is). A trust file that cannot be read is logged and the project counts as
    untrusted (fail closed)."""
    store = TrustStore.default(env)
    try:
        project = check_project(cwd, store=store)
    except TrustError as exc:
        _log.warning("%s; project files stay untrusted", exc)
        return {"project_trusted": False, **({"mcp_env": dict(env)} if env is not None else {})}
    found: dict[str, Any] = {"project_root": str(project.root), "project_trusted": project.trusted}
    plugins = enabled_plugins(claude_home(env), project.root, project.trusted)
    found["claude_plugins"] = [plugin.to_json() for plugin in plugins.plugins]
    found["project_mcp_approved"] = {}
    if project.trusted:
        try:
            found["project_mcp_approved"] = check_project_servers(project.root, store).approved
        except TrustError as exc:
            _log.warning("%s; the project's MCP servers are not started", exc)
    if env is not None:
        found["mcp_env"] = dict(env)
    return found
