"""What an editor brings over ACP, through the SDK's own client driving the real binary (issue
43 deliver 1): its buffers (``fs/read_text_file``, ``fs/write_text_file``), its terminal (a
``bash`` call's output live in ``terminal/create``'s terminal; the command runs here) and its MCP
servers (``mcpServers`` of ``session/new``, stdio and http), each under the same approvals as
without an editor."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from acp import text_block
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio
from acp_support import TIMEOUT, Editor, agent

pytestmark = pytest.mark.anyio

MCP_SERVER = Path(__file__).resolve().parents[2] / "facets" / "mcp_feature" / "mcp_server.py"


def results(editor: Editor, status: str) -> list[str]:
    """The text of every tool call update with ``status``, in order."""
    return [
        json.dumps(u.get("content") or [])
        for u in editor.of("tool_call_update")
        if u.get("status") == status
    ]


async def test_the_tools_read_and_write_the_editors_buffers_after_approval(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    notes = str(project / "notes.txt")
    (project / "disk.txt").write_text("only on disk\n")
    editor = Editor()
    editor.buffers = {notes: "remember the eggs\n"}  # unsaved: the disk says milk
    edit = {"path": "notes.txt", "edits": [{"oldText": "eggs", "newText": "bread"}]}
    stale = {"path": "notes.txt", "edits": [{"oldText": "bread", "newText": "jam"}]}
    steps = [
        {"toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}},
                       {"name": "read", "arguments": {"path": "disk.txt"}}]},
        {"text": "Read."},
        {"toolCalls": [{"name": "edit", "arguments": edit}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "new.txt", "content": "new\n"}}]},
        {"text": "Edited."},
        {"toolCalls": [{"name": "write", "arguments": {"path": "notes.txt", "content": "x\n"}}]},
        {"text": "Refused."},
        {"toolCalls": [{"name": "edit", "arguments": stale}]},
        {"text": "Stale."},
    ]  # fmt: skip
    async with agent(editor, project, env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id

            done = await conn.prompt(session_id=sid, prompt=[text_block("read")])
            assert done.stop_reason == "end_turn"
            assert sorted(editor.reads) == [str(project / "disk.txt"), notes]  # in parallel
            shown = " ".join(results(editor, "completed"))
            assert "remember the eggs" in shown and "milk" not in shown  # the buffer's text
            assert "only on disk" in shown  # the editor had no buffer: the disk

            editor.answers = ["allow", "allow"]
            editor.updates.clear()
            done = await conn.prompt(session_id=sid, prompt=[text_block("edit")])
            assert done.stop_reason == "end_turn"
            assert [title for title, _ in editor.asked] == ["edit notes.txt", "write new.txt"]
            assert editor.writes == [
                (notes, "remember the bread\n"),
                (str(project / "new.txt"), "new\n"),
            ]
            assert (project / "notes.txt").read_text() == "remember the milk\n"  # unsaved
            assert not (project / "new.txt").exists()

            editor.answers = ["deny"]  # the editor's buffers never bypass the approval
            done = await conn.prompt(session_id=sid, prompt=[text_block("overwrite")])
            assert done.stop_reason == "end_turn"
            assert len(editor.writes) == 2 and editor.buffers[notes] == "remember the bread\n"

            editor.buffers[notes] = "remember the cheese\n"  # the user typed meanwhile
            editor.answers = ["allow"]
            editor.updates.clear()
            done = await conn.prompt(session_id=sid, prompt=[text_block("again")])
            assert done.stop_reason == "end_turn"
            (failed,) = results(editor, "failed")
            assert "changed in the editor since you last read it" in failed
            assert editor.buffers[notes] == "remember the cheese\n" and len(editor.writes) == 2


async def test_the_editors_mcp_servers_start_for_the_session_and_ask_before_each_call(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    dump = tmp_path / "server-env.json"
    editor = Editor()
    steps = [
        {"toolCalls": [{"name": "mcp__notes__echo", "arguments": {"text": "hello"}}]},
        {"text": "Echoed."},
        {"toolCalls": [{"name": "mcp__notes__echo", "arguments": {"text": "again"}}]},
        {"text": "Denied."},
    ]
    server = McpServerStdio(
        name="notes",
        command=sys.executable,
        args=[str(MCP_SERVER), "--name", "notes", "--env-dump", str(dump)],
        env=[EnvVariable(name="NOTES_TOKEN", value="from-the-editor")],
    )
    async with agent(editor, project, env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[server])).session_id
            assert json.loads(dump.read_text())["NOTES_TOKEN"] == "from-the-editor"

            editor.answers = ["allow"]
            done = await conn.prompt(session_id=sid, prompt=[text_block("echo")])
            assert done.stop_reason == "end_turn"
            assert [title for title, _ in editor.asked] == ["mcp__notes__echo"]
            assert "echo: hello" in results(editor, "completed")[0]

            editor.answers = ["deny"]
            editor.updates.clear()
            done = await conn.prompt(session_id=sid, prompt=[text_block("echo again")])
            assert done.stop_reason == "end_turn"
            assert len(editor.asked) == 2
            (failed,) = results(editor, "failed")
            assert "denied by editor" in failed and "echo: again" not in failed


async def test_a_command_runs_here_and_its_output_is_shown_live_in_an_editor_terminal(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    editor = Editor()
    editor.terminal = True
    command = "echo ran >> runs.txt; echo hello; while [ ! -e go ]; do sleep 0.1; done; exit 3"
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "It failed."},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo quick"}}]},
        {"text": "Quick."},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo denied >> runs.txt"}}]},
        {"text": "Denied."},
    ]
    async with agent(editor, project, env, steps) as (conn, _process):
        with anyio.fail_after(TIMEOUT):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            editor.answers = ["allow"]
            async with anyio.create_task_group() as group:
                group.start_soon(conn.prompt, sid, [text_block("run it")])
                await editor.running.wait()  # in progress: its terminal is embedded already
                (running,) = [u for u in editor.updates if u.get("status") == "in_progress"]
                (terminal_id,) = editor.terminals
                assert running["content"] == [{"type": "terminal", "terminal_id": terminal_id}]
                terminal = editor.terminals[terminal_id]
                await terminal.shows("hello")  # live: the command has not ended
                assert terminal.exit_code is None
                (project / "go").touch()
            terminal_id = next(iter(editor.terminals))
            terminal = editor.terminals[terminal_id]
            (failed,) = [u for u in editor.of("tool_call_update") if u.get("status") == "failed"]
            assert failed["content"] == [{"type": "terminal", "terminal_id": terminal_id}]
            await terminal.released.wait()  # the agent waits for its exit, then releases it
            assert terminal.exit_code == 3
            assert terminal.output.startswith("hello\n")
            assert terminal.output.rstrip().endswith("Command exited with code 3")

            editor.answers = ["allow"]  # too quick to stream: the result's text, exit 0
            done = await conn.prompt(session_id=sid, prompt=[text_block("quick")])
            assert done.stop_reason == "end_turn"
            quick = editor.terminals[list(editor.terminals)[-1]]
            await quick.released.wait()
            assert (quick.output, quick.exit_code) == ("quick", 0)

            editor.answers = ["deny"]  # never ran: no terminal, the denial as text
            editor.updates.clear()
            done = await conn.prompt(session_id=sid, prompt=[text_block("denied")])
            assert done.stop_reason == "end_turn"
            assert len(editor.terminals) == 2
            (denied,) = results(editor, "failed")
            assert "denied by editor" in denied
    # the command ran once, here (sandbox, scrubbed environment, recovery): not in the editor
    assert (project / "runs.txt").read_text() == "ran\n"


async def test_an_http_mcp_server_of_the_editor(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    editor = Editor()
    steps = [
        {"toolCalls": [{"name": "mcp__web__echo", "arguments": {"text": "over http"}}]},
        {"text": "Echoed."},
    ]
    server = HttpMcpServer(
        type="http",
        name="web",
        url=f"http://127.0.0.1:{port}/mcp",
        headers=[HttpHeader(name="X-Token", value="t0")],
    )
    async with await anyio.open_process(
        [sys.executable, str(MCP_SERVER), "--http", str(port), "--name", "web"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as process:
        try:
            with anyio.fail_after(TIMEOUT):
                while True:  # the server listens: poll its port (no time is assumed)
                    try:
                        await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                        break
                    except OSError:
                        await anyio.sleep(0.1)
            async with agent(editor, project, env, steps) as (conn, _process):
                with anyio.fail_after(TIMEOUT):
                    new = await conn.new_session(cwd=str(project), mcp_servers=[server])
                    editor.answers = ["allow"]
                    done = await conn.prompt(session_id=new.session_id, prompt=[text_block("echo")])
                    assert done.stop_reason == "end_turn"
                    assert [title for title, _ in editor.asked] == ["mcp__web__echo"]
                    assert "echo: over http" in results(editor, "completed")[0]
        finally:
            process.terminate()
