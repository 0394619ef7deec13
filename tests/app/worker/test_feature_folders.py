"""Feature packages from development folders, and ``--dev`` hot reload in the worker (item 6).

A tiny facet package folder, ``shouter``, contributes a ``shout`` tool through its ``"session"``
facet. With ``--facets-dir`` the worker loads it next to the installed features; with ``--dev``
an edit of its source swaps the new code in while the session stays open (docs/design/reload.md#session-worker-reload: the
harness is held while quiescent), and the next call runs the new code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import TIMEOUT, Client, connected, text_of, worker_process, write_script

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio

PLUGIN = """
from chord.facets import define_facet
from chord import hookimpl
from pico3 import HarnessService
from pico3.tools import ToolDeclaration, ToolResult

WORD = "{word}"


async def execute(args, api, ctx):
    return ToolResult.text(f"{{WORD}} {{args['text']}}".upper())


def setup(env):
    harness = env.use(HarnessService)
    tool = ToolDeclaration(
        "shout",
        "Shout a text.",
        {{"type": "object", "properties": {{"text": {{"type": "string"}}}}, "required": ["text"]}},
        execute,
        replay="safe",
    )
    env.on_activate(lambda: env.own(harness.add_registration(lambda h: h.register_tool(tool))))


facet = define_facet("test/shouter", setup)


@hookimpl
def chord_facets(host):
    return [facet] if host == "session" else []
"""


def write_package(folder: Path, word: str) -> Path:
    package = folder / "shouter"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text('"""A test facet package."""\n')
    (package / "plugin.py").write_text(PLUGIN.format(word=word))
    return package


def shout(text: str) -> dict[str, object]:
    return {"toolCalls": [{"name": "shout", "arguments": {"text": text}}]}


async def test_a_facets_dir_package_contributes_a_tool_and_dev_mode_reloads_it(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    package = write_package(tmp_path, "hello")
    script = write_script(
        tmp_path / "script.json",
        [shout("one"), {"text": "first"}, shout("two"), {"text": "second"}],
    )
    reload_lines: list[str] = []

    def on_stderr(line: str) -> None:
        if "reload shouter:" in line:
            reload_lines.append(line)

    args = ("--faux-script", str(script), "--facets-dir", str(package), "--dev")
    async with (
        worker_process(session, agent_env, *args, on_stderr=on_stderr) as worker,
        connected(Client(), worker.socket) as client,
    ):
        status: list[Any] = []
        changed = anyio.Event()

        def on_status(value: Any, _ctx: Any, _delivery: Any) -> None:
            nonlocal changed
            status.append(value)
            changed.set()
            changed = anyio.Event()

        client.status.state.subscribe(on_status)

        async def reports(count: int) -> list[dict[str, Any]]:
            with anyio.fail_after(TIMEOUT):
                while not status or len(status[-1]["reloads"]) < count:
                    await changed.wait()
            return status[-1]["reloads"]

        assert "shout" in client.view["config"]["selectedTools"]
        await client.root.send({"content": "shout one"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert text_of(client.entries("pi.tool_result")[-1]) == "HELLO ONE"
        assert status[0]["dev"] is True and status[0]["sessionId"] == session.id
        assert status[0]["pid"] == worker.process.pid and status[0]["reloads"] == []

        # A broken edit is reported (to every client) and the running code keeps serving.
        (package / "plugin.py").write_text("def broken(:\n")
        (failed,) = await reports(1)
        assert failed["package"] == "shouter" and failed["ok"] is False
        assert failed["stage"] == "load" and "SyntaxError" in failed["message"]

        write_package(tmp_path, "goodbye")
        fixed = (await reports(2))[1]
        assert fixed["outcome"] == "reloaded" and fixed["ok"] is True

        await client.root.send({"content": "shout two"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended(2))
        assert text_of(client.entries("pi.tool_result")[-1]) == "GOODBYE TWO"
        assert text_of(client.entries("pi.assistant")[-1]) == "second"
    assert [": failed:" in line for line in reload_lines] == [True, False]  # also in the log
