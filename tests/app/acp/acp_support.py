"""The editor's side of the ACP tests: the SDK's client, recording and answering as told, and
the real ``coding-agent acp`` binary started with a scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120


class Terminal:
    """One editor terminal: its command run to its end, its output and exit code."""

    def __init__(self, argv: list[str], cwd: str | None) -> None:
        self.argv = argv
        self.cwd = cwd
        self.output = ""
        self.exit_code: int | None = None
        self.exited = anyio.Event()
        self.released = anyio.Event()
        self.task: asyncio.Future[None] | None = None
        self._grew = anyio.Event()

    async def shows(self, text: str) -> None:
        """Wait until the terminal's output holds ``text``."""
        while text not in self.output:
            await self._grew.wait()

    async def run(self) -> None:
        async with await anyio.open_process(self.argv, cwd=self.cwd) as process:
            assert process.stdout is not None
            async for chunk in process.stdout:  # as it comes, as an editor's terminal shows it
                self.output += chunk.decode()
                self._grew.set()
                self._grew = anyio.Event()
            self.exit_code = await process.wait()
        self.exited.set()


class Editor:
    """The editor's side: records every update and answers permission requests as told."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.asked: list[tuple[str, list[str]]] = []
        self.labels: list[list[str]] = []
        """Each permission request's option names, as the editor shows them."""
        self.answers: list[str | None] = []
        self.asking = anyio.Event()
        self.running = anyio.Event()
        self.buffers: dict[str, str] | None = None
        """With buffers, the editor offers ``fs``: reads of these paths answer their text,
        other paths are refused; writes replace the buffer (the disk is left alone, as an
        unsaved buffer)."""
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []

        self.terminal = False
        """Offer ``terminal``: ``terminal/create`` runs the command for real, as an editor does."""
        self.terminals: dict[str, Terminal] = {}

    def capabilities(self) -> ClientCapabilities:
        offered = self.buffers is not None
        return ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=offered, write_text_file=offered),
            terminal=self.terminal,
        )

    async def create_terminal(
        self, session_id: str, command: str, args: list[str] | None = None, **kwargs: Any
    ) -> CreateTerminalResponse:
        assert self.terminal, "terminals are asked only of an editor offering them"
        terminal = Terminal([command, *(args or [])], kwargs.get("cwd"))
        terminal.task = asyncio.ensure_future(terminal.run())
        terminal_id = f"term-{len(self.terminals)}"
        self.terminals[terminal_id] = terminal
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self.terminals[terminal_id]
        await terminal.exited.wait()
        return WaitForTerminalExitResponse(exit_code=terminal.exit_code)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> TerminalOutputResponse:
        terminal = self.terminals[terminal_id]
        return TerminalOutputResponse(output=terminal.output, truncated=False)

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        self.terminals[terminal_id].released.set()

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        task = self.terminals[terminal_id].task
        if task is not None:
            task.cancel()

    async def read_text_file(self, session_id: str, path: str, **_: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        if self.buffers is None or path not in self.buffers:
            raise RequestError(-32002, f"no buffer for {path}")
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **_: Any
    ) -> WriteTextFileResponse:
        assert self.buffers is not None, "writes are asked only of an editor offering fs"
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **_: Any):
        self.asked.append((tool_call.title, [o.option_id for o in options]))
        self.labels.append([o.name for o in options])
        self.asking.set()
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update.model_dump(exclude_none=True))
        if self.updates[-1].get("status") == "in_progress":
            self.running.set()  # a tool call started

    def on_connect(self, conn: Any) -> None:
        del conn

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u["session_update"] == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.of(kind))


@asynccontextmanager
async def agent(
    editor: Editor, project: Path, env: dict[str, str], steps: list[dict[str, Any]]
) -> AsyncIterator[tuple[Any, Any]]:
    script = project.parent / f"script-{len(os.listdir(project.parent))}.json"
    script.write_text(json.dumps(steps))
    async with spawn_agent_process(
        editor, str(BINARY), "acp", "--faux-script", str(script), env=env, cwd=str(project)
    ) as (conn, process):
        with anyio.fail_after(TIMEOUT):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=editor.capabilities()
            )
        yield conn, process
