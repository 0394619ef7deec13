"""The worker's ``!cmd`` runner in process: what reaches the model's context (issue 18 item 4)."""

from __future__ import annotations

import pytest

from chord.context import BACKGROUND
from chord.remote import ServiceCall
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import WorkerConfig, open_session_host

pytestmark = pytest.mark.anyio


async def test_bang_output_is_user_context_and_double_bang_is_not(session: Session) -> None:
    async with open_session_host(WorkerConfig(session, fsync=False)) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)

        async def run(command: str, include: bool) -> dict[str, object]:
            call = ServiceCall("coding-agent.shell", "run", (root.id, command, include))
            return await runtime.host.services.invoke(call, BACKGROUND)

        shown = await run("echo visible-output", True)
        hidden = await run("echo hidden-output", False)
        missing = await run("no-such-command-here", True)
        derived = await root.context(BACKGROUND)
        texts = [str(m.get("content")) for m in derived.messages if m.get("role") == "user"]
    assert shown["output"] == "visible-output" and shown["exitCode"] == 0
    assert hidden["output"] == "hidden-output" and hidden["excluded"] is True
    assert missing["exitCode"] == 127
    assert "Command exited with code 127" in str(missing["output"])
    assert texts[0] == "Ran `echo visible-output`\n```\nvisible-output\n```"
    assert texts[1].startswith("Ran `no-such-command-here`")
    assert not any("hidden-output" in text for text in texts)
