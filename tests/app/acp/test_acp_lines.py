"""``coding-agent acp`` answers what is not JSON-RPC as JSON-RPC 2.0 says, and refuses a relative
``cwd`` as ACP requires: the real binary, spoken to line by line over its stdin and stdout.

A line that is not JSON gets ``-32700`` (``Parse error``, ``"id": null``), JSON that is not an
object ``-32600``; each is one line on stderr, no traceback, and the connection goes on.
``session/new`` with ``cwd: "relative/path"`` is ``-32602`` "cwd must be an absolute path", and
no session is made in the agent's own folder.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import PROTOCOL_VERSION
from acp_support import BINARY, TIMEOUT
from anyio.streams.buffered import BufferedByteReceiveStream

pytestmark = pytest.mark.anyio


class Lines:
    """The agent's stdin and stdout, one JSON-RPC line at a time."""

    def __init__(self, process: Any) -> None:
        self.process = process
        self.out = BufferedByteReceiveStream(process.stdout)

    async def send(self, line: str) -> None:
        await self.process.stdin.send(line.encode() + b"\n")

    async def answer(self) -> dict[str, Any]:
        with anyio.fail_after(TIMEOUT):
            return json.loads(await self.out.receive_until(b"\n", 1 << 20))

    async def call(self, id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.send(
            json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        )
        return await self.answer()


async def test_lines_that_are_not_json_rpc_are_answered_and_a_relative_cwd_refused(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "faux.json"
    script.write_text(json.dumps([{"text": "unused"}]))
    async with await anyio.open_process(
        [str(BINARY), "acp", "--faux-script", str(script)],
        cwd=str(project),
        env=agent_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdin is not None and process.stderr is not None
        agent = Lines(process)
        await agent.send("this is not json")
        parse = await agent.answer()
        assert parse["jsonrpc"] == "2.0" and parse["id"] is None, parse
        assert parse["error"]["code"] == -32700 and parse["error"]["message"] == "Parse error"
        await agent.send("[1, 2]")
        invalid = await agent.answer()
        assert invalid["id"] is None and invalid["error"]["code"] == -32600, invalid

        # the connection goes on
        started = await agent.call(
            1, "initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}}
        )
        assert started["id"] == 1 and started["result"]["protocolVersion"] == PROTOCOL_VERSION
        refused = await agent.call(2, "session/new", {"cwd": "relative/path", "mcpServers": []})
        assert refused["id"] == 2 and refused["error"]["code"] == -32602, refused
        assert "cwd must be an absolute path" in refused["error"]["message"], refused
        made = await agent.call(3, "session/new", {"cwd": str(project), "mcpServers": []})
        assert made["id"] == 3 and made["result"]["sessionId"], made

        await process.stdin.aclose()  # the editor closes the connection
        with anyio.fail_after(TIMEOUT):
            assert await process.wait() == 0
            said = b""
            try:
                while True:
                    said += await process.stderr.receive()
            except anyio.EndOfStream:
                pass
    errors = said.decode()
    assert not (project / "relative").exists()  # nothing made in the agent's own folder
    assert "Traceback" not in errors and "ERROR:root" not in errors, errors
    answered = [line for line in errors.splitlines() if "answered a line" in line]
    assert len(answered) == 2, errors
    assert "Parse error (-32700)" in answered[0] and "Invalid Request (-32600)" in answered[1]
