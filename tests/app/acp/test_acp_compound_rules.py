"""``coding-agent acp``: an editor's "Always allow" for a compound command keeps one rule per
command, through the real binary, a scripted model and real bash.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import text_block
from acp_support import TIMEOUT, Editor, agent

pytestmark = pytest.mark.anyio


async def test_always_allow_keeps_every_command_of_a_compound_line(
    project: Path, agent_env: dict[str, str]
) -> None:
    (project / "sub").mkdir()
    marker = project / "MARKER"

    def bash(command: str) -> dict[str, object]:
        return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}

    steps = [
        bash("cd sub && echo one"),
        bash("echo two; cd sub"),  # the same commands in another order: allowed
        bash(f"cd sub && touch {marker}"),  # one more command: asks (refused)
        {"text": "done"},
    ]
    editor = Editor()
    editor.answers = ["always", "deny"]
    async with agent(editor, project, agent_env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            assert done.stop_reason == "end_turn"
    assert editor.labels[0] == [
        "Allow",
        "Always allow Bash(cd:*) and Bash(echo:*) in this session",
        "Reject",
    ]
    assert len(editor.asked) == 2  # the reordered line ran unasked
    assert editor.labels[1][1] == f"Always allow Bash(touch {marker}) in this session"
    assert not marker.exists()
