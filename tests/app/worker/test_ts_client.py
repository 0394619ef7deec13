"""examples/ts-client/client.mjs — the real Chord 0.87.1 binding under node — attached to a real
worker: it prints the live transcript and the approval dialog that opens (issue 21 deliver 4)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from worker_support import TIMEOUT, Client, allow, connected, worker_process, write_script

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "interop"))
from node_env import node_and_npm, staged_script  # noqa: E402

pytestmark = pytest.mark.anyio

SCRIPT = [
    {
        "text": "Checking the folder first.",
        "toolCalls": [{"name": "bash", "arguments": {"command": "echo hi"}}],
    },
    {"text": "All done: the folder says hi."},
]


async def test_the_ts_client_prints_the_live_transcript_and_open_dialogs(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    node, _ = node_and_npm()
    client_script = staged_script(ROOT / "examples" / "ts-client" / "client.mjs")
    script = write_script(tmp_path / "script.json", SCRIPT)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(Client(), worker.socket) as client,
    ):
        process = await anyio.open_process([node, str(client_script), str(worker.socket)])
        try:
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            seen: list[str] = []

            async def until(needle: str) -> None:
                with anyio.fail_after(TIMEOUT):
                    while not any(needle in line for line in seen):
                        seen.append((await lines.receive_until(b"\n", 1 << 20)).decode())

            await until("attached to")
            await client.root.send({"content": "what does the folder say?"}, BACKGROUND)
            await until("[pi.user] what does the folder say?")
            await until('[dialog open] approval: {"')  # the bash call waits for a decision
            assert any('"name":"bash"' in line and "echo hi" in line for line in seen)
            await client.wait_for(lambda: bool(client.approvals))
            await allow(client.approvals[0].facade, client.approvals[0].request, BACKGROUND)
            await until("[dialog closed] approval: bash")
            await until("[pi.assistant] All done: the folder says hi.")
        finally:
            process.terminate()
            with anyio.CancelScope(shield=True):
                await process.wait()
                await process.aclose()
