"""The stdio transport with a bound on a message's size: the SDK's ``stdio_client``, whose line
buffer grows without limit (a 64 MB reply took a worker to ~500 MiB), with one change.

:func:`bounded_stdio_client` starts the server as the SDK does (its own session, so its whole
process tree is stopped; stdin closed first, then SIGTERM, then SIGKILL) and reads its stdout as
bytes, one JSON-RPC message per line. A line longer than ``max_bytes`` is never held: the bytes
past the cap are skipped up to the next newline. When the refused message is an answer whose
``id`` shows in its first bytes (every SDK writes ``{"jsonrpc":"2.0","id":...`` first), the
session gets an error answer for that id at once, naming the server and the cap, so the call
fails now rather than at its timeout; otherwise a :class:`MessageTooLarge` goes to the read
stream in its place (the runner notes it; the call times out with that note). When its stdout
closes, a :class:`ServerExited` with the server's exit status (once it exited, waited for at most
half a second) goes to the read stream last.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from anyio.abc import Process
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp import StdioServerParameters
    from mcp.shared.message import SessionMessage

__all__ = [
    "TOO_LARGE_CODE",
    "MessageTooLarge",
    "ServerExited",
    "bounded_stdio_client",
    "exit_text",
    "too_large_text",
]

TOO_LARGE_CODE = -32600
"""The JSON-RPC error code of the answer that replaces a refused one (invalid request)."""
_CHUNK = 65536
_ID = re.compile(rb'^\s*\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
"""The top-level ``id`` of a message, looked for before any nested object starts."""
_TERMINATE_AFTER = 2.0
_EXIT_WAIT = 0.5


class MessageTooLarge(Exception):
    """A server's message was larger than the cap and was dropped."""


class ServerExited(Exception):
    """The server's stdout closed; ``code`` is its exit status (``None``: still running, or
    not known), negative for a signal."""

    def __init__(self, code: int | None) -> None:
        super().__init__(exit_text(code))
        self.code = code


def exit_text(code: int | None) -> str:
    """How the server ended: ``exited with code 1``, ``was killed by signal 9``, ``closed its
    output``."""
    if code is None:
        return "closed its output"
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def too_large_text(server: str, size: int, max_bytes: int) -> str:
    """What a refused message turns into (the model and ``/mcp`` read it)."""
    return (
        f"MCP server {server!r} sent a message of more than {max_bytes} bytes (at least {size} "
        f"read): refused, over the cap max_message_bytes = {max_bytes} (raise it in mcp.json "
        "next to mcpServers if the server's answers are that large)"
    )


def _request_id(head: bytes) -> int | str | None:
    match = _ID.match(head)
    if match is None:
        return None
    try:
        found = json.loads(match.group(1))
    except ValueError:
        return None
    return found if isinstance(found, int | str) else None


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters, errlog: TextIO, *, max_bytes: int, name: str
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Like ``mcp.client.stdio.stdio_client`` (``server.env`` is the whole environment), with
    messages bounded by ``max_bytes`` (see the module docstring); ``name`` is the server's."""
    from mcp import types
    from mcp.client.stdio import get_default_environment
    from mcp.os.posix.utilities import terminate_posix_process_tree
    from mcp.shared.message import SessionMessage

    reader_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, writer_out = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        process: Process = await anyio.open_process(
            [server.command, *server.args],
            env={**get_default_environment(), **(server.env or {})},
            stderr=errlog,
            cwd=server.cwd,
            start_new_session=True,
        )
    except OSError:
        for stream in (read_stream, write_stream, reader_in, writer_out):
            await stream.aclose()
        raise

    async def deliver(line: bytes) -> None:
        try:
            message: Any = types.JSONRPCMessage.model_validate_json(
                line.decode(server.encoding, server.encoding_error_handler)
            )
        except Exception as exc:
            await reader_in.send(exc)
            return
        await reader_in.send(SessionMessage(message))

    async def refuse(head: bytes, size: int) -> None:
        text = too_large_text(name, size, max_bytes)
        request = _request_id(head)
        if request is None:
            await reader_in.send(MessageTooLarge(text))
            return
        error = types.JSONRPCError(
            jsonrpc="2.0", id=request, error=types.ErrorData(code=TOO_LARGE_CODE, message=text)
        )
        await reader_in.send(SessionMessage(types.JSONRPCMessage(error)))

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        skipping: tuple[bytes, int] | None = None  # (the refused message's head, bytes seen)
        try:
            async with reader_in:
                async for chunk in process.stdout:
                    while chunk:
                        newline = chunk.find(b"\n")
                        piece, chunk = (
                            (chunk, b"") if newline < 0 else (chunk[:newline], chunk[newline + 1 :])
                        )
                        if skipping is not None:
                            skipping = (skipping[0], skipping[1] + len(piece))
                            if newline >= 0:
                                await refuse(*skipping)
                                skipping = None
                            continue
                        if len(buffer) + len(piece) > max_bytes:
                            head = bytes(buffer[:4096]) + piece[: max(0, 4096 - len(buffer))]
                            skipping = (head, len(buffer) + len(piece))
                            buffer.clear()
                            if newline >= 0:
                                await refuse(*skipping)
                                skipping = None
                            continue
                        buffer += piece
                        if newline >= 0:
                            line, buffer = bytes(buffer), bytearray()
                            if line.strip():
                                await deliver(line)
                with anyio.move_on_after(_EXIT_WAIT):  # stdout closed: it exits, or exited
                    await process.wait()
                await reader_in.send(ServerExited(process.returncode))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await anyio.lowlevel.checkpoint()

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with writer_out:
                async for message in writer_out:
                    data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    await process.stdin.send(
                        (data + "\n").encode(server.encoding, server.encoding_error_handler)
                    )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group, process:
        group.start_soon(stdout_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            if process.stdin is not None:
                try:
                    await process.stdin.aclose()
                except Exception:  # already closed
                    pass
            try:
                with anyio.fail_after(_TERMINATE_AFTER):
                    await process.wait()
            except TimeoutError:
                await terminate_posix_process_tree(process, _TERMINATE_AFTER)
            except ProcessLookupError:
                pass
            for stream in (read_stream, write_stream, reader_in, writer_out):
                await stream.aclose()
