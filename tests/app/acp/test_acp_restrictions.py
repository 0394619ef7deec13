"""Claude Code's restrictive switches over ACP: an editor is not offered the ``auto`` mode that
``permissions.disableBypassPermissionsMode`` disables, ``session/set_mode`` to it is refused
naming the file, and under ``permissions.denyInsteadOfPrompting`` a call that would ask is
refused without a ``session/request_permission`` (the turn ends normally). The real binary
over stdio, a scripted model, real files."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from acp import text_block
from acp_support import TIMEOUT, Editor, agent

pytestmark = pytest.mark.anyio


async def test_auto_is_not_offered_nor_entered_and_nothing_asks_the_editor(
    project: Path, agent_env: dict[str, str]
) -> None:
    settings = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    switches = {"disableBypassPermissionsMode": "disable", "denyInsteadOfPrompting": True}
    settings.write_text(json.dumps({"permissions": switches}))
    editor = Editor()
    steps = [
        {"toolCalls": [{"name": "write", "arguments": {"path": "todo.txt", "content": "milk"}}]},
        {"text": "Could not write it."},
    ]
    async with agent(editor, project, agent_env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            assert [m.id for m in session.modes.available_modes] == [
                "ask", "accept-edits", "sandbox", "plan"
            ]  # fmt: skip
            sid = session.session_id
            with pytest.raises(Exception, match="disableBypassPermissionsMode") as refused:
                await conn.set_session_mode(session_id=sid, mode_id="auto")
            assert str(settings) in str(refused.value.args) + repr(refused.value)
            done = await conn.prompt(session_id=sid, prompt=[text_block("write it")])
            assert done.stop_reason == "end_turn"
            assert editor.asked == []  # refused instead of asking
            assert not (project / "todo.txt").exists()
            assert editor.text() == "Could not write it."
