"""What an editor brings to a session besides prompts: its buffers and its MCP servers (its
terminal: :mod:`.terminal`).

Both become harness services of the session's host (``open_session_host(extra_services=…)``),
which runs in this process, so the features and the tools find them where they find the sandbox:

* :class:`AcpEditorFiles` is the tools' :class:`~coding_agent.worker.tools.EditorFiles` when the
  editor offers ``fs.readTextFile`` / ``fs.writeTextFile`` in ``initialize``: ``read``, ``edit``
  and ``write`` of a text file then ask the editor (``fs/read_text_file``,
  ``fs/write_text_file``), so unsaved changes are seen and edits land in its buffers. The tools
  run only once a call is approved, so the approval of every call stays as it is; the file
  history records the disk's content before a change (what ``/rewind`` restores), as without an
  editor. An editor that cannot read a file (or does not answer in :data:`EDITOR_TIMEOUT`
  seconds) leaves the read to the disk; a refused write fails the call, naming the editor's
  reason. Without the capability (or without an editor: the TUI, ``-p``) the tools use the disk.
* :func:`mcp_servers_entry` turns ``session/new``'s and ``session/load``'s ``mcpServers`` into
  the MCP feature's client servers (its harness service ``mcp_client_servers``): started for this
  session like the configured ones, and under the same rules — every call asks for approval by
  the default rules, the environment is scrubbed of the agent's secrets. A server with a
  configured server's name replaces it for this session.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from acp import RequestError
from acp.interfaces import Client
from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

__all__ = [
    "EDITOR_TIMEOUT",
    "MCP_CLIENT_SERVERS",
    "AcpEditorFiles",
    "mcp_servers_entry",
]

_log = logging.getLogger("coding_agent.acp")

EDITOR_TIMEOUT = 30.0
"""Seconds the editor has to answer ``fs/read_text_file``, ``fs/write_text_file`` or
``terminal/create``, and a terminal to exit once its call ended (:mod:`.terminal`)."""

MCP_CLIENT_SERVERS = "mcp_client_servers"
"""The MCP feature's harness service for a client's servers (``facets_mcp.config``'s
``CLIENT_SERVERS_SERVICE``; the app names feature services by their ids)."""


class AcpEditorFiles:
    """The editor's buffers for one session (module docstring); ``read`` and ``write`` say which
    of ``fs/read_text_file`` and ``fs/write_text_file`` the editor offered."""

    def __init__(self, client: Client, session_id: str, *, read: bool, write: bool) -> None:
        self._client = client
        self._session_id = session_id
        self.read = read
        self.write = write

    async def read_text(self, path: Path) -> str | None:
        if not self.read:
            return None
        try:
            with anyio.fail_after(EDITOR_TIMEOUT):
                response = await self._client.read_text_file(
                    session_id=self._session_id, path=str(path)
                )
        except TimeoutError:
            _log.warning("the editor did not answer fs/read_text_file %s: read from disk", path)
            return None
        except RequestError as error:  # not a file the editor can open: the disk's
            _log.info("the editor could not read %s (%s): read from disk", path, error)
            return None
        return response.content

    async def write_text(self, path: Path, text: str) -> bool:
        if not self.write:
            return False
        try:
            with anyio.fail_after(EDITOR_TIMEOUT):
                await self._client.write_text_file(
                    session_id=self._session_id, path=str(path), content=text
                )
        except TimeoutError:
            raise OSError(
                f"the editor did not take the new content within {EDITOR_TIMEOUT:g} s"
            ) from None
        except RequestError as error:
            raise OSError(f"the editor refused the write: {error}") from None
        return True


def _server_name(name: object) -> str:
    """A name our tools can carry (``mcp__<name>__<tool>``: letters, digits, ``_``, ``-``, at
    most 40): an editor's ``My files`` is ``My-files``."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", str(name)).strip("-")[:40]
    return cleaned or "editor"


def mcp_servers_entry(servers: Sequence[Any] | None) -> dict[str, Any] | None:
    """The MCP feature's ``mcp_client_servers`` value for an ACP request's ``mcpServers``
    (``None`` when there are none): ``{"source": …, "mcpServers": {name: entry}}`` in the shape
    of ``mcp.json``. A server of a kind this agent does not run is left out, with a log line."""
    entries: dict[str, Any] = {}
    for server in servers or ():
        name = _server_name(getattr(server, "name", ""))
        if isinstance(server, McpServerStdio):
            entries[name] = {
                "command": server.command,
                "args": list(server.args),
                "env": {variable.name: variable.value for variable in server.env},
            }
        elif isinstance(server, HttpMcpServer | SseMcpServer):
            entries[name] = {
                "type": server.type,
                "url": server.url,
                "headers": {header.name: header.value for header in server.headers},
            }
        else:
            _log.warning("an MCP server of the editor was left out: %r", server)
    if not entries:
        return None
    return {"source": "the editor's session (ACP mcpServers)", "mcpServers": entries}
