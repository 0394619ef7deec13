"""The ``/mcp`` screen in a real Textual app (Pilot), over the loopback source: every server
reachable in a scrolling list, failed ones first; a server's details with its stderr; a server
that cannot start is given up on after a few tries; Restart and ``/mcp restart``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from dialog_support import DialogApp, dialog_body, dialog_options, dialog_title, presentation
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from chord.context import BACKGROUND
from facets_mcp.client import GIVE_UP_AFTER
from facets_mcp.tui import panel_text, prompt_arguments
from facets_mcp.tui import tui_facet as mcp_tui_facet
from pico3.models.faux import faux_response

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

MISSING = 13


async def test_the_screen_lists_every_server_failed_first_and_gives_up_on_a_missing_binary(
    tmp_path: Path,
) -> None:
    servers = {"echo": stdio_server()}
    servers |= {f"m{i:02}": {"command": str(tmp_path / f"nope{i}")} for i in range(MISSING)}
    servers["broken"] = stdio_server("--fail")
    write_config(tmp_path / "config", servers)
    app = DialogApp()
    async with session(tmp_path) as s, app.run_test(size=(100, 40)) as pilot:
        # a missing binary is tried GIVE_UP_AFTER times, then left alone (not forever)
        def settled(value: dict[str, object]) -> bool:
            found = {x["name"]: x for x in value["servers"]}  # type: ignore[index,union-attr]
            failing = ["broken", *(f"m{i:02}" for i in range(MISSING))]
            return found["echo"]["state"] == "ready" and all(
                found[name].get("gaveUpAfter") == GIVE_UP_AFTER for name in failing
            )

        state = await s.until(settled)
        gave_up = next(x for x in state["servers"] if x["name"] == "m00")
        assert gave_up["restarts"] == GIVE_UP_AFTER - 1 and "retryInSeconds" not in gave_up
        async with (
            presentation(s.host, [mcp_tui_facet], app.tui, s.group),
            anyio.create_task_group() as group,
        ):
            group.start_soon(app.tui.run_command, "/mcp", BACKGROUND)
            screen = await app.shown_dialog(pilot)
            assert dialog_title(screen) == "MCP servers"
            assert "Not supported: tools that require task-augmented execution" in (
                dialog_body(screen)
            )
            # the dialog numbers options 1-9 ("1. "), and indents the rest as far: labels follow
            options = [o[3:] for o in dialog_options(screen)]
            # every server is listed (15 > the 12 lines the old panel had), failed ones first
            assert len(options) == MISSING + 3  # + echo, broken, Close
            assert options[-2].startswith("● echo (stdio) ready · 8 tools")
            assert all(o.startswith("✗ ") for o in options[: MISSING + 1])
            assert options[-1] == "Close"
            # the last failed server is reachable: scroll down to it and open it
            broken = next(i for i, o in enumerate(options) if o.startswith("✗ broken"))
            for _ in range(broken):
                await pilot.press("down")
            await pilot.press("enter")
            await app.until(lambda: (d := app.dialog()) is not None and d is not screen)
            details = await app.shown_dialog(pilot)
            assert dialog_title(details) == "MCP server broken"
            body = dialog_body(details)
            assert "stderr| cannot start: missing API key" in body
            assert dialog_options(details) == ["1. Restart", "2. Back"]
            await pilot.press("2", "enter")  # back to the list, then a missing binary's details
            await app.until(lambda: (d := app.dialog()) is not None and d is not details)
            listed = await app.shown_dialog(pilot)
            await pilot.press("enter")  # the first: m00
            await app.until(lambda: (d := app.dialog()) is not None and d is not listed)
            missing = await app.shown_dialog(pilot)
            assert f"gave up after {GIVE_UP_AFTER} failed starts" in dialog_body(missing)
            assert "/mcp restart m00 tries again" in dialog_body(missing)
            await pilot.press("1", "enter")  # Restart: tried once more
            await s.until(
                lambda v: any(
                    x["name"] == "m00" and x["restarts"] == GIVE_UP_AFTER for x in v["servers"]
                )
            )
            await app.until(lambda: app.dialog() is None)
            assert await app.tui.run_command("/mcp restart echo", BACKGROUND) is True
            await s.until(
                lambda v: any(
                    x["name"] == "echo" and x["restarts"] == 1 and x["state"] == "ready"
                    for x in v["servers"]
                )
            )
        del pilot


def test_panel_text_without_servers_says_where_to_configure() -> None:
    text = panel_text({"servers": [], "errors": ["x.json: not valid JSON"]})
    assert "! x.json: not valid JSON" in text
    assert "~/.config/coding-agent/mcp.json" in text and ".mcp.json" in text


def test_panel_text_puts_failed_servers_first() -> None:
    ready = {"name": "a", "transport": "stdio", "state": "ready", "tools": []}
    failed = {"name": "b", "transport": "http", "state": "failed", "error": "refused", "tools": []}
    ready["notes"] = ["tool 'q' is hidden: it requires task-augmented execution"]
    text = panel_text({"servers": [ready, failed], "errors": []})
    assert text.index("✗ b (http) failed") < text.index("● a (stdio) ready")
    assert "    note: tool 'q' is hidden: it requires task-augmented execution" in text


async def test_a_servers_prompt_is_a_command_that_sends_its_text(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"x": stdio_server("--extras")})
    app = DialogApp()
    async with session(tmp_path, [faux_response("compared")]) as s, app.run_test() as pilot:
        await s.server("x", "ready")
        async with presentation(s.host, [mcp_tui_facet], app.tui, s.group):
            await pilot.pause()
            assert {"mcp__x__compare", "mcp__x__review"} <= set(app.tui.commands)
            line = "/mcp__x__compare apples 'big green pears'"
            assert await app.tui.run_command(line, BACKGROUND) is True
            root = await s.root()
            await root.wait_for_idle(BACKGROUND)
            (user,) = await root.entries(BACKGROUND, kind="pi.user")
            assert "Compare apples with big green pears" in repr(user.model)


def test_prompt_arguments_fill_in_order_and_by_name() -> None:
    assert prompt_arguments(["a", "b"], "one two three") == {"a": "one", "b": "two three"}
    assert prompt_arguments(["a", "b"], "b=x 'y z'") == {"b": "x", "a": "y z"}
    assert prompt_arguments(["code"], "") == {}


async def test_the_key_line_says_each_key_once_and_offers_no_details_without_servers(
    tmp_path: Path,
) -> None:
    """A new user's ``/mcp``: the line read "↑↓ or 1 select · enter answers · Enter: a
    server's details · Escape: close" with no server to open."""
    write_config(tmp_path / "config", {})
    app = DialogApp()
    async with (
        session(tmp_path) as s,
        app.run_test(size=(80, 24)) as pilot,
        presentation(s.host, [mcp_tui_facet], app.tui, s.group),
        anyio.create_task_group() as group,
    ):
        group.start_soon(app.tui.run_command, "/mcp", BACKGROUND)
        screen = await app.shown_dialog(pilot)
        assert dialog_title(screen) == "MCP servers"
        assert screen.keys_line() == "↑↓ or 1 select · enter answers · esc closes"
        await pilot.press("escape")
        group.cancel_scope.cancel()
