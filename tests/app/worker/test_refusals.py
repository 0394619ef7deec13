"""Input that cannot be stored is refused at the boundary, with its own code (issue 24).

A raw wire client (the frames a TypeScript or hand-written client sends) talks to a real worker:
a prompt holding a lone surrogate (``"\\ud800"`` is valid JSON, but no UTF-8 encoder takes it),
anywhere in the input, is refused with ``invalid_argument`` naming the field; so is a bad
``whenBusy``. Nothing faults: the next prompt is answered and stored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import TIMEOUT, worker_command, write_script

from chord.transport.frames import FrameDecoder, ResultFrame
from chord.transport.unix import UnixSocketStream, open_unix_stream
from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio


class RawClient:
    def __init__(self, stream: UnixSocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(1 << 26)
        self.next_id = 0

    async def call(self, text: str) -> ResultFrame:
        """Send one request whose ``call`` is the JSON text ``text``; return its result."""
        self.next_id += 1
        line = f'{{"type":"request","id":{self.next_id},"call":{text}}}\n'
        await self.stream.send(line.encode())
        with anyio.fail_after(TIMEOUT):
            while True:
                for frame in self.decoder.feed(await self.stream.receive()):
                    if isinstance(frame, ResultFrame) and frame.id == self.next_id:
                        return frame


def _conversation(generation: int, member: str, args: str) -> str:
    instance = json.dumps({"key": "1", "generation": generation})
    return (
        f'{{"serviceId":"pi.conversation","instance":{instance},'
        f'"member":"{member}","args":[{args}]}}'
    )


async def test_unstorable_or_bad_input_is_refused_with_its_code_and_nothing_faults(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "Done."}])
    process = await anyio.open_process(
        worker_command(session, "--faux-script", str(script), "--exit-on-stdin-eof"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=agent_env,
    )
    results: dict[str, Any] = {}
    async with process:
        assert process.stdout is not None and process.stdin is not None
        with anyio.fail_after(TIMEOUT):
            line = (await process.stdout.receive()).decode()
        socket = line.split(" ", 1)[1].strip()
        async with await open_unix_stream(socket) as stream:
            client = RawClient(stream)
            subscribed = await client.call(
                '{"serviceId":"$chord.service","member":"subscribe",'
                '"args":["s0","pi.conversation","keyed"]}'
            )
            assert subscribed.ok, subscribed.error
            generation = subscribed.result["instances"][0]["instance"]["generation"]  # type: ignore[index]
            results["lone"] = await client.call(
                _conversation(generation, "send", r'{"content":"hello \ud800"}')
            )
            results["nested"] = await client.call(
                _conversation(generation, "send", r'{"content":[{"type":"text","text":"x\udfff"}]}')
            )
            results["entry"] = await client.call(
                _conversation(generation, "write", r'{"kind":"note","data":{"\udc80":1}}')
            )
            results["busy"] = await client.call(
                _conversation(generation, "send", '{"content":"hi","whenBusy":"nope"}')
            )
            results["fine"] = await client.call(
                _conversation(generation, "send", r'{"content":"caf\u00e9"}')
            )
            results["entries"] = await client.call(
                _conversation(generation, "entries", '{"kind":"pi.user"}')
            )
        await process.stdin.aclose()
        with anyio.fail_after(TIMEOUT):
            assert await process.wait() == 0
    for name in ("lone", "nested", "entry"):  # refused by the wire server, before any method
        frame = results[name]
        assert not frame.ok and frame.error.code == "service_invalid_value", (name, frame)
    assert results["lone"].error.message == (
        "pi.conversation.send args[0].content: a lone surrogate (\\ud800) at character 6: "
        "not valid Unicode; replace it"
    )
    assert (
        "send args[0].content[0].text: a lone surrogate (\\udfff)"
        in results["nested"].error.message
    )
    assert "write args[0].data: a key holding a lone surrogate (\\udc80)" in (
        results["entry"].error.message
    )
    busy = results["busy"]
    assert not busy.ok and busy.error.code == "invalid_argument", busy
    assert "whenBusy must be one of" in busy.error.message
    assert results["fine"].ok, results["fine"].error
    users = results["entries"].result
    assert [entry["model"][0]["content"] for entry in users] == ["café"], "only the good one"


async def test_a_prompt_that_is_not_utf8_is_refused_in_one_line(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """``-p`` with an argument that is not UTF-8 (decoded with surrogateescape): the harness
    refuses it naming the field, one line, exit 2, instead of faulting the session."""
    script = write_script(tmp_path / "script.json", [{"text": "Never."}])
    argv = [sys.executable.encode(), b"-m", b"coding_agent.cli.main", b"-p", b"hi \xff"]
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            [*argv, b"--faux-script", str(script).encode()], env=agent_env, cwd=project, check=False
        )
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2, lines
    assert lines == [
        "coding-agent: error: [invalid_argument] input.content: a lone surrogate (\\udcff) at "
        "character 3: not valid Unicode, so it cannot be stored; remove or replace it"
    ]
