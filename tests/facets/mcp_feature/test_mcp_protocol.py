"""The rest of the protocol against a real FastMCP server (``mcp_server.py --extras``, issue 40
item 3): the server's instructions in the system prompt, resources and templates through
``mcp__list_resources``/``mcp__read_resource``, a ``list_changed`` refresh, roots = the project
folder, a task-required tool hidden with a note, progress notifications in the call's slot, and
a prompt fetched through the ``mcp.servers`` service."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import SDK_LEAKS, WAIT, session, stdio_server, write_config

from chord.context import BACKGROUND
from coding_agent.tui.commands.prompts import context_rows
from facets_mcp.offers import INSTRUCTIONS_KEY
from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

INSTRUCTIONS = "Always greet the echo server before using it."  # mcp_server.py's


def calls(*pairs: tuple[str, dict[str, Any]]) -> list[Any]:
    steps = [
        faux_response(faux_tool_call(name, args, id=f"c{i}"))
        for i, (name, args) in enumerate(pairs)
    ]
    return [*steps, faux_response("done")]


def text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


async def test_instructions_resources_templates_roots_list_changed_and_hidden_task_tools(
    tmp_path: Path,
) -> None:
    write_config(tmp_path / "config", {"x": stdio_server("--extras")})
    script = calls(
        ("mcp__x__roots", {}),
        ("mcp__list_resources", {}),
        ("mcp__read_resource", {"server": "x", "uri": "memo://note/alpha"}),
        ("mcp__read_resource", {"server": "x", "uri": "memo://greeting"}),
        ("mcp__read_resource", {"server": "nope", "uri": "memo://greeting"}),
        ("mcp__x__grow", {}),
    )
    async with session(tmp_path, script) as s:
        ready = await s.server("x", "ready")
        names = {t["tool"] for t in ready["tools"]}
        assert "queued" not in names and {"grow", "roots", "progress"} <= names
        assert ready["notes"] == [
            "tool 'queued' is hidden: it requires task-augmented execution, which this client "
            "does not support"
        ]
        assert ready["templates"] == [
            {"uriTemplate": "memo://note/{name}", "name": "note", "description": "A note by name."}
        ]
        roots, listed, note, greeting, unknown, grown = await s.turn()
        assert text(roots) == Path(tmp_path).as_uri()
        assert "x: greeting <memo://greeting>" in text(listed)
        assert "x: note <memo://note/{name}> (a template" in text(listed)
        assert text(note) == "[resource memo://note/alpha]\nnote alpha"
        assert text(greeting) == "[resource memo://greeting]\nhello"
        assert unknown["isError"] is True and "No MCP server named 'nope'" in text(unknown)
        assert text(grown) == "grown"
        # list_changed: the new tool and resource arrive without a restart
        after = await s.until(
            lambda v: any(
                "extra" in {t["tool"] for t in x["tools"]}
                and "memo://extra" in {r["uri"] for r in x["resources"]}
                for x in v["servers"]
            )
        )
        assert after["servers"][0]["restarts"] == 0
        config = await (await s.root()).config(BACKGROUND)
        assert {"mcp__x__extra", "mcp__list_resources", "mcp__read_resource"} <= set(
            config["selectedTools"]
        )
        # the instructions went to the model as a system section (/context sizes each one)
        (system, *_) = await (await s.root()).entries(BACKGROUND, kind="pi.system")
        sections: dict[str, Any] = system.data["sections"]  # pyright: ignore[reportAssignmentType,reportIndexIssue]
        rendered = sections[INSTRUCTIONS_KEY]["rendered"]
        assert f"## MCP server x\n{INSTRUCTIONS}" in rendered
        (row,) = [r for r in context_rows(sections, []) if r[0] == INSTRUCTIONS_KEY]
        assert row[1] > 0 and row[2] == "MCP server x"  # /context: its size and its source


async def test_progress_notifications_reach_the_calls_slot(tmp_path: Path) -> None:
    release = tmp_path / "release"
    os.mkfifo(release)
    write_config(tmp_path / "config", {"x": stdio_server("--extras")})
    script = calls(("mcp__x__progress", {"release": str(release)}))
    async with session(tmp_path, script) as s:
        await s.server("x", "ready")
        root = await s.root()
        watch = await root.watch(BACKGROUND)
        seen = anyio.Event()
        watch.start(lambda envelope: seen.set() if "3/3 · step 3" in repr(envelope) else None)
        results: list[Any] = []
        async with anyio.create_task_group() as group:

            async def turn() -> None:
                results.extend(await s.turn())

            group.start_soon(turn)
            with anyio.fail_after(WAIT):
                await seen.wait()

            def go() -> None:
                with open(release, "w") as fifo:
                    fifo.write("now")

            await anyio.to_thread.run_sync(go)
        watch.stop()
        (result,) = results
        assert text(result) == "finished now"


async def test_a_prompt_is_fetched_with_its_arguments(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"x": stdio_server("--extras")})
    async with session(tmp_path) as s:
        ready = await s.server("x", "ready")
        assert {
            "name": "compare",
            "arguments": ["a", "b"],
            "description": "Compare two things.",
        } in ready["prompts"]
        got = await s.mcp.get_prompt("x", "compare", {"a": "apples", "b": "pears"}, BACKGROUND)
        assert got == {"messages": [{"role": "user", "text": "Compare apples with pears"}]}
        missing = await s.mcp.get_prompt("x", "compare", {"a": "apples"}, BACKGROUND)
        assert "MCP server 'x' failed prompt compare" in missing["error"]
