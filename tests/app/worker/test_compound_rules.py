"""A compound command's standing choice through the real worker process and real bash.

The dialog for ``cd sub && echo one`` offers one rule per command (``Bash(cd:*)``,
``Bash(echo:*)``); keeping them allows the same commands in another order without asking, and
a line with one more command asks again (denied here: its marker file is never created).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from worker_support import Client, connected, text_of, worker_process, write_script

from chord.context import BACKGROUND, Context
from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio


def bash(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


async def test_a_compound_command_keeps_one_rule_per_command_and_nothing_wider(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**agent_env, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "c")}
    (session.cwd / "sub").mkdir()
    marker = tmp_path / "MARKER"
    script = write_script(
        tmp_path / "script.json",
        [
            bash("cd sub && echo one"),
            bash("echo two; cd sub"),  # the same commands, in another order
            bash(f"cd sub && echo three && touch {marker}"),  # one more command
            {"text": "done"},
        ],
    )
    offers: list[dict[str, Any]] = []

    async def keep_then_deny(facade: Any, request: dict[str, Any], ctx: Context) -> None:
        offers.append(request)
        if len(offers) == 1:
            decision = {"decision": "allow", "by": "test", "rules": request["rules"]}
            await facade.decide({**decision, "scope": "session"}, BACKGROUND)
        else:
            await facade.decide({"decision": "deny", "by": "test"}, BACKGROUND)

    client = Client(approve=keep_then_deny)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    assert offers[0]["rules"] == ["Bash(cd:*)", "Bash(echo:*)"]
    assert "rule" not in offers[0] and offers[0]["scopes"] == ["session", "user"]
    assert [o["args"]["command"] for o in offers[1:]] == [
        f"cd sub && echo three && touch {marker}"
    ]  # the reordered line ran unasked; the longer one asked
    assert offers[1]["rule"] == f"Bash(touch {marker})"  # only what is not allowed yet
    ran = [text_of(entry).strip() for entry in client.entries("pi.tool_result")]
    assert ran[:2] == ["one", "two"]
    assert not marker.exists()
