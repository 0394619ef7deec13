"""ACP's JSON lines on stdin and stdout, answering a line that is not JSON-RPC as JSON-RPC 2.0
says: the SDK's own stdio transport logs such a line with a traceback and answers nothing, so
the editor waits for an answer that never comes.

:class:`JsonLines` is an ACP SDK *transport* (``send``, ``receive``, ``close`` of decoded
messages, as ``AgentSideConnection`` takes one): a line that does not parse is answered
``{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}``, one
that parses to something other than an object ``-32600`` (``Invalid Request``); each is one
line on stderr, no traceback, and the connection goes on.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, TextIO

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "JsonLines"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class JsonLines:
    """Newline-delimited JSON-RPC messages over ``reader`` and ``writer`` (the SDK's
    ``stdio_streams()``); what cannot be a message is answered and reported on ``log``."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, log: TextIO | None = None
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._log = log
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("the connection to the editor is closed")
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._lock:  # one message a line, whichever task sends it
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message (``None`` at the end of the input)."""
        while True:
            line = await self._read_line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError as error:  # not JSON (or not UTF-8)
                await self._refuse(PARSE_ERROR, "Parse error", f"not JSON: {error}")
                continue
            if not isinstance(message, dict):
                kind = type(message).__name__
                await self._refuse(
                    INVALID_REQUEST, "Invalid Request", f"a JSON {kind}, not a JSON-RPC object"
                )
                continue
            return message

    async def close(self) -> None:
        self._closed = True

    async def _refuse(self, code: int, message: str, why: str) -> None:
        log = self._log if self._log is not None else sys.stderr
        print(f"coding-agent acp: answered a line with {message} ({code}): {why}", file=log)
        log.flush()
        error = {"code": code, "message": message, "data": {"message": why}}
        await self.send({"jsonrpc": "2.0", "id": None, "error": error})

    async def _read_line(self) -> bytes:
        """One line, however long (the SDK's framing: a line past the reader's buffer limit is
        read in pieces); what is left at the end of the input."""
        chunks: list[bytes] = []
        try:
            while True:
                try:
                    chunks.append(await self._reader.readuntil(b"\n"))
                    return b"".join(chunks)
                except asyncio.LimitOverrunError as overrun:
                    chunks.append(await self._reader.readexactly(overrun.consumed))
        except asyncio.IncompleteReadError as end:
            chunks.append(end.partial)
            return b"".join(chunks)
