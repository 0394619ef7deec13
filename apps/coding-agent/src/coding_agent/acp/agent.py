"""The Agent Client Protocol agent: ``coding-agent acp`` (module docstring of :mod:`coding_agent.acp`).

An editor starts ``coding-agent acp`` and speaks JSON-RPC over its stdin and stdout; stderr is
the log. :class:`CodingAgentAcp` answers:

* ``initialize`` — the protocol version, ``loadSession``, prompts with images and embedded
  context, MCP servers over stdio, HTTP and SSE; the editor's ``fs`` capability is kept for
  the sessions (:mod:`.editor`);
* ``session/new`` — a new durable session in ``cwd`` (what ``coding-agent`` would make there),
  with the editor's ``mcpServers`` started for it, in the permission mode a new session of the
  TUI would start in (``permission_mode`` of config.toml, or Claude Code's
  ``permissions.defaultMode``: :func:`~coding_agent.settings.permissions.starting_mode`); the
  reply carries the permission modes, that one current, and the model option;
* ``session/load`` — an existing session by its id (``coding-agent sessions`` lists them): its
  transcript is replayed as updates, and a turn the last process left unfinished goes on;
* ``session/prompt`` — one turn; the reply's ``stopReason`` is ``end_turn`` or ``cancelled``,
  and a failed turn is an error naming why;
* ``session/cancel`` — aborts the running turn;
* ``session/set_mode`` — the permission mode (``ask``, ``accept-edits``, ``sandbox``, ``plan``,
  ``auto``); ``session/set_config_option`` with ``model`` — the model (``provider/id``).

A line that is not JSON-RPC is answered ``-32700`` (``Parse error``) or ``-32600`` with
``"id": null`` and one line on stderr (:mod:`.lines`); a ``cwd`` that is not absolute is refused
(``-32602``), as ACP requires.

A session is served by one process at a time (the session's lock): loading one a TUI has open
is refused with a message saying so.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from acp import PROTOCOL_VERSION, run_agent, stdio_streams
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from coding_agent.acp.editor import MCP_CLIENT_SERVERS, AcpEditorFiles, mcp_servers_entry
from coding_agent.acp.errors import failed, invalid
from coding_agent.acp.lines import JsonLines
from coding_agent.acp.session import AcpSession
from coding_agent.acp.translate import prompt_content
from coding_agent.session_files.folders import SessionError, create_session, open_session
from coding_agent.settings.config import load_config
from coding_agent.settings.permissions import starting_mode
from coding_agent.worker.main import WorkerBusy, session_worker_config
from coding_agent.worker.tools import EDITOR_FILES_SERVICE

__all__ = ["CodingAgentAcp", "run_acp"]


class CodingAgentAcp:
    """The ACP ``Agent`` (module docstring): each session runs in ``group``."""

    def __init__(
        self,
        group: anyio.abc.TaskGroup,
        *,
        model: str | None = None,
        faux_script: str | None = None,
    ) -> None:
        self._group = group
        self._model = model
        self._faux_script = faux_script
        self._client: Client | None = None
        self._capabilities = ClientCapabilities()
        self._sessions: dict[str, AcpSession] = {}

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        **_: Any,
    ) -> InitializeResponse:
        if client_capabilities is not None:
            self._capabilities = client_capabilities
        try:
            version = importlib.metadata.version("pico-coding-agent")
        except importlib.metadata.PackageNotFoundError:
            version = "0"
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
            ),
            agent_info=Implementation(name="coding-agent", title="coding-agent", version=version),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        del method_id  # provider keys come from the environment and config.toml

    def _services(self, session_id: str, mcp_servers: Sequence[Any] | None) -> dict[str, Any]:
        """The harness services the editor brings to a session: its buffers (when it offers
        ``fs``) and its MCP servers (:mod:`.editor`)."""
        assert self._client is not None
        services: dict[str, Any] = {}
        fs = self._capabilities.fs
        if fs is not None and (fs.read_text_file or fs.write_text_file):
            services[EDITOR_FILES_SERVICE] = AcpEditorFiles(
                self._client,
                session_id,
                read=bool(fs.read_text_file),
                write=bool(fs.write_text_file),
            )
        servers = mcp_servers_entry(mcp_servers)
        if servers is not None:
            services[MCP_CLIENT_SERVERS] = servers
        return services

    async def _open(
        self, session_id: str, cwd: str, mcp_servers: Sequence[Any] | None, *, new: bool
    ) -> AcpSession:
        if self._client is None:
            raise failed("no client is connected")
        if not Path(cwd).is_absolute():  # ACP: never resolved against the agent's own folder
            raise invalid(f"cwd must be an absolute path (got {cwd!r})")
        try:
            session = create_session(Path(cwd)) if new else open_session(session_id)
        except SessionError as error:
            raise invalid(str(error)) from None
        # a new session starts in the mode config.toml or Claude Code's permissions.defaultMode
        # choose (as the TUI's and -p's do); a loaded one keeps its own
        mode = starting_mode(session.cwd, load_config(session.cwd).permission_mode) if new else None
        config = session_worker_config(
            session, model=self._model, faux_script=self._faux_script, permission_mode=mode
        )
        if config.environment is not None:  # this process runs the commands: keys stay in config
            config.environment.withhold_from_process()
        served = AcpSession(
            session.id,
            config,
            self._client,
            services=self._services(session.id, mcp_servers),
            terminal=bool(self._capabilities.terminal),
        )
        try:
            await self._group.start(served.run)
        except WorkerBusy:
            raise invalid(
                f"session {session.id} is open elsewhere (a TUI or -p); close it first"
            ) from None
        self._sessions[session.id] = served
        return served

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[Any] | None = None, **_: Any
    ) -> NewSessionResponse:
        served = await self._open("", cwd, mcp_servers, new=True)
        return NewSessionResponse(
            session_id=served.id, modes=served.modes(), config_options=[served.model_option()]
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Sequence[Any] | None = None, **_: Any
    ) -> LoadSessionResponse:
        served = self._sessions.get(session_id) or await self._open(
            session_id, cwd, mcp_servers, new=False
        )
        await served.replay_transcript()
        return LoadSessionResponse(modes=served.modes(), config_options=[served.model_option()])

    def _session(self, session_id: str) -> AcpSession:
        served = self._sessions.get(session_id)
        if served is None:
            raise invalid(f"unknown session {session_id!r}: session/new or session/load it first")
        return served

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        served = self._session(session_id)
        content = prompt_content(prompt, served.cwd)
        if not content:
            raise invalid("the prompt is empty")
        return PromptResponse(stop_reason=await served.prompt(content))  # pyright: ignore[reportArgumentType]

    async def cancel(self, session_id: str, **_: Any) -> None:
        served = self._sessions.get(session_id)
        if served is not None:
            await served.cancel()

    async def set_session_mode(
        self, session_id: str, mode_id: str, **_: Any
    ) -> SetSessionModeResponse:
        await self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> SetSessionConfigOptionResponse:
        served = self._session(session_id)
        if config_id != "model" or not isinstance(value, str):
            raise invalid(f"unknown option {config_id!r} (options: model)")
        await served.set_model(value)
        return SetSessionConfigOptionResponse(config_options=[served.model_option()])

    def close(self) -> None:
        """Close every session (their hosts flush and release the sessions)."""
        for served in self._sessions.values():
            served.close()


async def run_acp(*, model: str | None = None, faux_script: str | None = None) -> int:
    """Serve ACP on stdin and stdout until the editor closes them; returns the exit code."""
    async with anyio.create_task_group() as group:
        agent = CodingAgentAcp(group, model=model, faux_script=faux_script)
        try:
            reader, writer = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
            lines = JsonLines(reader, writer)  # answers a line that is not JSON-RPC
            await run_agent(agent, lines)  # pyright: ignore[reportArgumentType]
        finally:
            agent.close()
    print("coding-agent acp: the editor closed the connection", file=sys.stderr)
    return 0
