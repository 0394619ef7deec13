"""The file tools' guarantees through the real worker process (issue 14 item 7 and issue 24).

Read before edit: an ``edit`` of a file the conversation never read is refused with a message
telling the model to read it; the read's stamp is stored in the session (a worker killed with
SIGKILL and started again still knows it), and a change on disk since the read is refused too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from worker_support import Client, allow, connected, text_of, worker_process, write_script

from chord.context import BACKGROUND
from coding_agent.sessions import Session

pytestmark = pytest.mark.anyio


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": name, "arguments": arguments}]}


def edit(old: str, new: str) -> dict[str, Any]:
    return call("edit", path="README.md", edits=[{"oldText": old, "newText": new}])


def results(client: Client) -> list[str]:
    return [text_of(entry) for entry in client.entries("pi.tool_result")]


async def test_read_before_edit_holds_across_a_worker_restart(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    readme = session.cwd / "README.md"
    script = write_script(  # step n answers a transcript with n answers: restarts go on
        tmp_path / "script.json",
        [
            *(edit("42", "43"), call("read", path="README.md"), edit("42", "43"), {"text": "ok"}),
            *(edit("43", "44"), {"text": "done"}, edit("44", "45"), {"text": "done"}),
        ],
    )
    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "change the answer"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        refused, _read, edited = results(client)
        assert refused.startswith("README.md exists but has not been read in this conversation.")
        assert "Read it first with the read tool" in refused
        assert edited == "Successfully replaced 1 block in README.md."
        assert "The answer is 43." in readme.read_text()
        await worker.kill()  # SIGKILL: only what was committed survives
        await client.wait_for(lambda: client.root_closed)

    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        # The edit wrote the file, which counts as read; the stamp came back from storage.
        await client.root.send({"content": "again"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert results(client)[-1] == "Successfully replaced 1 block in README.md."
        assert "The answer is 44." in readme.read_text()

        readme.write_text(readme.read_text() + "Edited by hand.\n")  # changed behind its back
        await client.root.send({"content": "once more"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended(2))
        assert results(client)[-1].startswith("README.md has changed on disk since you last read")
        assert "The answer is 44." in readme.read_text()
