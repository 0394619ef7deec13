"""A subagent's own MCP servers (``mcpServers`` in its definition): a real stdio server (the MCP
tests' fixture) started when the subagent starts, its tools offered to that subagent alone and
approved like any MCP tool, and the server stopped when the subagent ends."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp_support import SDK_LEAKS, SERVER, session, stdio_server, write_config

from chord import RemoteServiceError
from chord.context import BACKGROUND
from facets_subagents.definitions import parse_definition
from facets_subagents.session import session_facet as subagents_facet
from pico3.models.faux import FauxResponse, FauxState, faux_response, faux_tool_call
from pico3.models.provider import Request, ToolResultMessage, UserMessage

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


def agent_file(home: Path, marker: Path) -> None:
    server = json.dumps(
        {"command": stdio_server()["command"], "args": [SERVER, "--marker", str(marker)]}
    )
    path = home / ".claude" / "agents" / "scratcher.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "---\nname: scratcher\ndescription: Uses its own scratch server.\n"
        f"mcpServers:\n  - shared\n  - scratch: {server}\n---\nYou are the scratcher.\n"
    )


class Script:
    """The parent hands one task to ``scratcher``; the subagent calls its server's ``echo``,
    then the session's ``shared`` server's ``echo``, then reports."""

    def __init__(self) -> None:
        self.parent: list[Request] = []
        self.child: list[Request] = []

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        last = request.messages[-1]
        if not any("scratcher" in s for s in request.system):
            self.parent.append(request)
            if isinstance(last, UserMessage):
                args = {"description": "scratch", "prompt": "go", "subagent_type": "scratcher"}
                return faux_response(faux_tool_call("agent", args, id="a1"))
            return faux_response("parent done")
        self.child.append(request)
        if len(self.child) == 1:
            return faux_response(faux_tool_call("mcp__scratch__echo", {"text": "hi"}, id="e1"))
        if len(self.child) == 2:
            return faux_response(faux_tool_call("mcp__shared__echo", {"text": "yo"}, id="e2"))
        assert isinstance(last, ToolResultMessage)
        return faux_response("report: done")


def names(request: Request) -> set[str]:
    return {tool.name for tool in request.tools}


async def test_a_subagents_own_server_runs_for_it_alone_and_stops_when_it_ends(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    agent_file(tmp_path, marker)
    write_config(tmp_path / "config", {"shared": stdio_server("--name", "shared")})
    script = Script()
    async with session(tmp_path, [script] * 20, extra_facets=[subagents_facet]) as s:
        await s.server("shared", "ready")
        root = await s.root()
        config = await root.config(BACKGROUND)
        selected = [*config.get("selectedTools", []), "agent"]
        await root.set_config({"selectedTools": selected}, BACKGROUND)
        results = await s.turn()
        assert results[-1]["content"][0]["text"] == "report: done"
        # the subagent was offered its server's tools and the named session server's
        assert {"mcp__scratch__echo", "mcp__shared__echo"} <= names(script.child[0])
        # the parent never was (neither before nor after the subagent ran)
        assert all("mcp__scratch__echo" not in names(r) for r in script.parent)
        # both calls ran, each asked for as any MCP tool's call is
        (entry,) = await root.entries(BACKGROUND, limit=5, kind="pi.tool_result")
        child_id = entry.data["details"]["conversation"]  # pyright: ignore[reportIndexIssue,reportOptionalSubscript]
        child = await s.worker.harness.conversation(child_id, BACKGROUND)
        assert child is not None
        texts = [
            e.model[0]["content"][0]["text"]  # pyright: ignore[reportIndexIssue]
            for e in reversed(await child.entries(BACKGROUND, limit=20, kind="pi.tool_result"))
        ]
        assert texts == ["echo: hi", "echo: yo"]
        assert {a["name"] for a in s.approvals} >= {"mcp__scratch__echo", "mcp__shared__echo"}
        # started once, then stopped when the subagent ended: gone from the state, its tools
        # unregistered, its process ended
        await s.until(lambda v: all(x["name"] != "scratch" for x in v["servers"]))
        assert "mcp__scratch__echo" not in s.worker.harness.tools.names()
        (pid,) = marker.read_text().split()
        assert _ended(int(pid))


def _ended(pid: int) -> bool:
    """The process is gone (or a zombie nobody reaped yet: it runs no more)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_plugins_agent_gets_no_servers_and_a_bad_entry_is_named() -> None:
    text = (
        "---\nname: p\ndescription: d\nmcpServers:\n  - scratch:\n      command: x\n"
        "  - 3\n---\nbody\n"
    )
    definition, warnings = parse_definition(text, "agents/p.md")
    assert definition.mcp_servers == ({"scratch": {"command": "x"}},)
    assert warnings == (
        "agents/p.md:4: mcpServers: 3 is neither a configured server's name nor {name: "
        "server}; it is left out",
    )
    definition, warnings = parse_definition(text, "plugin/agents/p.md", plugin=True)
    assert definition.mcp_servers == ()
    assert "mcpServers is not honoured in a plugin's agent" in warnings[-1]


class Parallel:
    """The parent runs ``scratcher`` twice in one message; each calls its server's ``echo``
    and, once it has the answer, restarts nothing: it reports."""

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        last = request.messages[-1]
        if not any("scratcher" in s for s in request.system):
            if isinstance(last, UserMessage):
                calls = [
                    faux_tool_call(
                        "agent",
                        {"description": f"s{n}", "prompt": f"go {n}", "subagent_type": "scratcher"},
                        id=f"a{n}",
                    )
                    for n in (1, 2)
                ]
                return faux_response(*calls)
            return faux_response("parent done")
        if isinstance(last, ToolResultMessage):
            return faux_response("report: done")
        return faux_response(faux_tool_call("mcp__scratch__echo", {"text": "hi"}, id="e1"))


async def test_two_subagents_running_at_once_share_one_server(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    agent_file(tmp_path, marker)
    write_config(tmp_path / "config", {"shared": stdio_server("--name", "shared")})
    async with session(tmp_path, [Parallel()] * 20, extra_facets=[subagents_facet]) as s:
        root = await s.root()
        await root.set_config({"selectedTools": ["agent"]}, BACKGROUND)
        results = await s.turn()
        assert [r["content"][0]["text"] for r in results] == ["report: done"] * 2
        await s.until(lambda v: all(x["name"] != "scratch" for x in v["servers"]))
    assert len(marker.read_text().split()) == 1  # one server for both


class Echoing:
    """The parent hands one task to ``scratcher``, which calls its server's ``echo`` once and
    reports what it answered."""

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        last = request.messages[-1]
        if not any("scratcher" in s for s in request.system):
            if isinstance(last, UserMessage):
                args = {"description": "scratch", "prompt": "go", "subagent_type": "scratcher"}
                return faux_response(faux_tool_call("agent", args, id="a1"))
            return faux_response("parent done")
        if isinstance(last, ToolResultMessage):
            return faux_response(f"report: {last.content[0].text}")  # pyright: ignore[reportAttributeAccessIssue]
        return faux_response(faux_tool_call("mcp__scratch__echo", {"text": "hi"}, id="e1"))


async def test_mcp_restart_restarts_a_running_subagents_server_and_says_when_it_is_not_running(
    tmp_path: Path,
) -> None:
    """``/mcp restart scratch`` (the ``mcp.servers`` service's ``restart``) of a subagent's own
    server restarts the one the subagent uses while it runs; once the subagent has ended it
    says, in one line, that the subagent is not running."""
    marker = tmp_path / "started"
    agent_file(tmp_path, marker)
    write_config(tmp_path / "config", {"shared": stdio_server("--name", "shared")})
    asked, go = anyio.Event(), anyio.Event()

    async def gate(request: dict[str, object]) -> None:
        if request.get("name") == "mcp__scratch__echo":  # the subagent runs, its call waits
            asked.set()
            await go.wait()

    async with session(tmp_path, [Echoing()] * 20, extra_facets=[subagents_facet], gate=gate) as s:
        root = await s.root()
        await root.set_config({"selectedTools": ["agent"]}, BACKGROUND)
        handle = await root.send("go", BACKGROUND)
        with anyio.fail_after(60):
            await asked.wait()
        await s.mcp.restart("scratch", BACKGROUND)
        await s.until(
            lambda v: any(
                x["name"] == "scratch" and x["restarts"] == 1 and x["state"] == "ready"
                for x in v["servers"]
            )
        )
        go.set()  # the call goes to the restarted server
        with anyio.fail_after(60):
            await handle.wait(BACKGROUND)
        assert (await s.results())[-1]["content"][0]["text"] == "report: echo: hi"
        assert len(marker.read_text().split()) == 2  # started, then started again
        await s.until(lambda v: all(x["name"] != "scratch" for x in v["servers"]))
        with pytest.raises(RemoteServiceError) as raised:
            await s.mcp.restart("scratch", BACKGROUND)
        assert raised.value.message == (
            "MCP server 'scratch' is agent scratcher's own (mcpServers): it runs only while "
            "that subagent runs, and it is not running now"
        )


class Delegate:
    """The parent hands one task to ``scratcher``, which reports at once."""

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        if any("scratcher" in s for s in request.system):
            return faux_response("report: done")
        if isinstance(request.messages[-1], UserMessage):
            args = {"description": "scratch", "prompt": "go", "subagent_type": "scratcher"}
            return faux_response(faux_tool_call("agent", args, id="a1"))
        return faux_response("parent done")


async def _delegate(tmp: Path, trusted_later: bool) -> Path:
    """Run the project's ``scratcher`` in a session whose project was trusted when the
    definitions were read and is ``trusted_later`` when the subagent runs (what a restarted
    worker sees once trust was withdrawn); the marker file its server writes when it starts."""
    project = tmp / "project"
    project.mkdir(parents=True)
    marker = tmp / "started"
    agent_file(project, marker)  # project/.claude/agents/scratcher.md
    home = {"mcp_env": {"HOME": str(tmp / "home")}}  # the user's ~/.claude is elsewhere
    async with session(
        project, [Delegate()] * 20, trusted=True, services=home, extra_facets=[subagents_facet]
    ) as s:
        root = await s.root()
        await root.set_config({"selectedTools": ["agent"]}, BACKGROUND)
        services = s.worker.handle.services  # HarnessOptions.services, read at each use
        assert isinstance(services, dict)
        services["project_trusted"] = trusted_later
        results = await s.turn()
        assert results[-1]["content"][0]["text"] == "report: done"
        if trusted_later:  # stopped with its subagent
            await s.until(lambda v: all(x["name"] != "scratch" for x in v["servers"]))
    return marker


async def test_a_project_agents_server_starts_only_while_the_project_is_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A subagent of the project's own agent file, started while the project was trusted, does
    not start its inline server once the project is not trusted (its task's input outlives the
    trust: after a restart it is read again); while trusted, it does (the trap is armed)."""
    assert (await _delegate(tmp_path / "trusted", True)).exists()
    assert not (await _delegate(tmp_path / "withdrawn", False)).exists()
    assert (
        "agent scratcher (mcpServers): 'scratch' is not started: the agent is the project's "
        "own and the project is not trusted now" in caplog.text
    )
