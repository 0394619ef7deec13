"""``coding-agent acp`` driven by the Agent Client Protocol SDK's own client (issue 43 deliver 1):
the real binary over stdio, a scripted model, real files.

A whole tour: initialize, session/new with its modes and model option, a prompt whose answer
streams, a read and a write (its permission request allowed, the diff reported), a command
denied, a cancelled turn, the mode and model set, and session/load of a session whose agent
process was SIGKILLed, replaying its transcript and going on.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block
from acp_support import TIMEOUT, Editor, agent

from coding_agent.settings.trust import TrustStore, trust_path

pytestmark = pytest.mark.anyio


async def test_a_whole_tour_through_the_sdk_client(
    project: Path, agent_env: dict[str, str]
) -> None:
    editor = Editor()
    steps = [
        {"thinking": "look first", "text": "Reading.",
         "toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "Writing.",
         "toolCalls": [{"name": "write", "arguments": {"path": "todo.txt", "content": "milk\n"}}]},
        {"text": "The notes say to remember the milk."},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
        {"text": "Not allowed, then."},
    ]  # fmt: skip
    async with agent(editor, project, agent_env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            assert session.modes.current_mode_id == "ask"
            assert [m.id for m in session.modes.available_modes] == [
                "ask", "accept-edits", "sandbox", "plan", "auto"
            ]  # fmt: skip
            (model,) = session.config_options
            assert (model.id, model.current_value) == ("model", "faux/faux-1")

            editor.answers = ["allow"]
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            assert done.stop_reason == "end_turn"
            assert editor.text("agent_thought_chunk") == "look first"
            assert editor.text() == "Reading.Writing.The notes say to remember the milk."
            starts = editor.of("tool_call")
            assert [(s["title"], s["kind"], s["status"]) for s in starts] == [
                ("read notes.txt", "read", "pending"),
                ("write todo.txt", "edit", "pending"),
            ]
            assert starts[0]["locations"] == [{"path": str(project / "notes.txt")}]
            assert editor.asked == [("write todo.txt", ["allow", "always", "deny"])]
            finished = [u for u in editor.of("tool_call_update") if u.get("status") == "completed"]
            assert finished[0]["content"][0]["content"]["text"] == "remember the milk"
            diff = finished[1]["content"][-1]
            assert diff == {"type": "diff", "path": str(project / "todo.txt"), "new_text": "milk\n"}
            assert (project / "todo.txt").read_text() == "milk\n"

            editor.answers = ["deny"]
            editor.updates.clear()
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("touch it")])
            assert done.stop_reason == "end_turn"
            assert not (project / "ran.txt").exists()
            failed = [u for u in editor.of("tool_call_update") if u.get("status") == "failed"]
            assert len(failed) == 1 and "denied by editor" in json.dumps(failed[0])


async def test_modes_models_and_cancel(project: Path, agent_env: dict[str, str]) -> None:
    editor = Editor()
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch auto.txt"}}]},
        {"text": "Ran it."},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 300"}}]},
        {"text": "never"},
    ]
    async with agent(editor, project, agent_env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            await conn.set_session_mode(session_id=sid, mode_id="auto")
            done = await conn.prompt(session_id=sid, prompt=[text_block("touch")])
            assert done.stop_reason == "end_turn"
            assert (project / "auto.txt").exists() and editor.asked == []  # auto asks nobody
            answer = await conn.set_config_option(
                config_id="model", session_id=sid, value="faux/faux-1"
            )
            assert answer.config_options[0].current_value == "faux/faux-1"
            with pytest.raises(Exception, match="unknown mode"):
                await conn.set_session_mode(session_id=sid, mode_id="yolo")

            result: dict[str, Any] = {}
            editor.running = anyio.Event()

            async def run_prompt() -> None:
                result["stop"] = (
                    await conn.prompt(session_id=sid, prompt=[text_block("sleep")])
                ).stop_reason

            async with anyio.create_task_group() as group:
                group.start_soon(run_prompt)
                await editor.running.wait()  # the command runs: now cancel the turn
                await conn.cancel(session_id=sid)
            assert result["stop"] == "cancelled"


async def test_session_load_after_the_agent_was_killed_replays_and_goes_on(
    project: Path, agent_env: dict[str, str]
) -> None:
    first = Editor()
    steps = [{"text": "First answer."}, {"text": "Second answer."}]
    async with agent(first, project, agent_env, steps) as (conn, process):
        with anyio.fail_after(TIMEOUT):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("one")])
            assert done.stop_reason == "end_turn"
        os.kill(process.pid, signal.SIGKILL)
        with anyio.fail_after(TIMEOUT):
            await process.wait()
    second = Editor()
    async with agent(second, project, agent_env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            loaded = await conn.load_session(
                cwd=str(project), session_id=session.session_id, mcp_servers=[]
            )
            assert loaded.modes.current_mode_id == "ask"
            assert [u["content"]["text"] for u in second.of("user_message_chunk")] == ["one"]
            assert second.text() == "First answer."
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("two")])
            assert done.stop_reason == "end_turn"
            assert second.text() == "First answer.Second answer."
            with pytest.raises(Exception, match="unknown session"):
                await conn.prompt(session_id="nope", prompt=[text_block("x")])


def _settings(folder: Path, mode: str) -> None:
    """Claude Code's ``settings.json`` in ``folder``, with ``permissions.defaultMode``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps({"permissions": {"defaultMode": mode}}))


async def test_a_new_session_starts_in_claude_codes_default_mode_and_the_editor_is_told(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """``permissions.defaultMode`` of Claude Code's settings applies to an editor's new session
    as to the TUI's: the user's ``acceptEdits`` is ``accept-edits`` (a write runs without a
    permission request) and ``session/new`` reports it; a trusted project's ``plan`` makes a
    later new session stricter; ``session/load`` keeps the session's own mode."""
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}  # the trust file's home
    _settings(Path(env["CLAUDE_CONFIG_DIR"]), "acceptEdits")
    editor = Editor()
    steps = [
        {"toolCalls": [{"name": "write", "arguments": {"path": "todo.txt", "content": "milk\n"}}]},
        {"text": "Written."},
    ]
    async with agent(editor, project, env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            assert session.modes.current_mode_id == "accept-edits"
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("write")])
            assert done.stop_reason == "end_turn"
            assert (project / "todo.txt").read_text() == "milk\n" and editor.asked == []

            _settings(project / ".claude", "plan")
            TrustStore(trust_path(env)).set(project, True)
            stricter = await conn.new_session(cwd=str(project), mcp_servers=[])
            assert stricter.modes.current_mode_id == "plan"
    async with agent(Editor(), project, env, []) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            loaded = await conn.load_session(
                cwd=str(project), session_id=session.session_id, mcp_servers=[]
            )
            assert loaded.modes.current_mode_id == "accept-edits"  # its own, not the files'
