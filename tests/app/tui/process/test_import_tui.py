"""An imported Claude Code session opens in the TUI like any other: its conversation is shown
(tool calls, a tool we do not have as text, thinking) and the next prompt continues it. The real
worker process and the real TUI, driven with Textual's Pilot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_agent.importing.store import import_session, read_session_file

from .test_tree_commands import keeper, turn, user_texts

pytestmark = pytest.mark.anyio

SOURCE = Path(__file__).parents[2] / "fixtures" / "session_imports" / "claude_tools.jsonl"


async def test_an_imported_session_shows_its_conversation_and_continues(
    kit: Any, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    session = await import_session(read_session_file(SOURCE), cwd=project, env=agent_env)
    seen: dict[str, Any] = {}

    async def resumed(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and kit.entries(app), "the conversation")
        seen["prompts"] = user_texts(kit, app)
        seen["answers"] = kit.assistant_texts(app)
        seen["results"] = [r["toolName"] for r in kit.tool_results(app)]
        await turn(kit, pilot, "thanks", "Noted.")

    steps = [{"text": "unused"}] * 4 + [{"text": "Noted."}]  # four answers were imported
    await kit.drive(session, keeper(kit, session, agent_env, steps, tmp_path), resumed)
    assert seen["prompts"][0].startswith("<local-command-caveat>")  # in the model's context
    assert seen["prompts"][1] == "The checkout test is flaky, see the screenshot."
    assert seen["answers"][-1] == "The test passes now."
    assert "It sleeps; I will track this." in seen["answers"]
    assert seen["results"] == ["read", "edit", "bash"]


SLASH = SOURCE.with_name("claude_slash_command.jsonl")
"""A Claude Code session with ``/review cart.py`` (its ``<command-name>`` line, then the
expanded prompt as an ``isMeta`` line) and ``/model`` (a local command: its caveat is an
``isMeta`` line), as Claude Code 2.x writes them."""


def _drawn(app: Any) -> bool:
    """Whether the transcript has drawn the conversation down to its last prompt (it renders
    after the view arrives, in passes of its own)."""
    users, blocks = _shown(app)
    return "Fix it, please." in users and len(blocks) == 3 and all(body for *_, body in blocks)


def _shown(app: Any) -> tuple[list[str], list[tuple[str, bool, str]]]:
    """The transcript as drawn: the text of each user message widget, and each collapsed block
    as ``(title, collapsed, body)``."""
    from textual.widgets import Static

    from coding_agent.tui.widgets.collapsible import QuietCollapsible
    from coding_agent.tui.widgets.user_message import UserMessage

    users = [message.text for message in app.transcript.query(UserMessage)]
    blocks = [
        (
            str(block.title),
            block.collapsed,
            " ".join(str(s.render()) for s in block.query(".meta-text").results(Static)),
        )
        for block in app.transcript.query(QuietCollapsible)
    ]
    return users, blocks


async def test_what_claude_code_hid_is_one_dim_collapsed_line_and_the_model_still_reads_it(
    kit: Any, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    session = await import_session(read_session_file(SLASH), cwd=project, env=agent_env)
    seen: dict[str, Any] = {}

    async def resumed(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and kit.entries(app), "the conversation")
        await kit.wait_for(pilot, lambda: _drawn(app), "the transcript drawn")
        seen["prompts"] = user_texts(kit, app)
        seen["meta"] = [e.get("data", {}).get("meta") for e in kit.entries(app)]
        seen["users"], seen["blocks"] = _shown(app)

    await kit.drive(session, keeper(kit, session, agent_env, [], tmp_path), resumed)
    # the model's context is unchanged: the expanded prompt and the caveat are user messages
    assert seen["prompts"][1].startswith("Review cart.py for bugs")
    assert seen["prompts"][2].startswith("<local-command-caveat>")
    # the view document says which ones the user did not type (a web page or --json reads it)
    assert [m for m in seen["meta"] if m] == [
        "expanded /review prompt",
        "local command caveat",
        "output of /model",
    ]
    # the TUI shows them as Claude Code does: not as the user's, one collapsed line each
    assert not any("Review cart.py for bugs" in text for text in seen["users"])
    assert not any("local-command-caveat" in text for text in seen["users"])
    # a typed command shows as typed, not as the tags Claude Code wrote for it
    assert seen["users"] == ["/review cart.py", "/model sonnet", "Fix it, please."]
    titles = {title: (collapsed, body) for title, collapsed, body in seen["blocks"]}
    assert titles["(expanded /review prompt)"][0] is True
    assert "Review cart.py for bugs" in titles["(expanded /review prompt)"][1]
    assert titles["(local command caveat)"][0] is True
    assert titles["(output of /model)"][0] is True


async def test_import_in_the_tui_picks_this_folders_claude_code_session_and_switches_to_it(
    kit: Any,
    session: Any,
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import re
    import shutil

    for key in ("XDG_STATE_HOME", "CLAUDE_CONFIG_DIR"):  # the TUI's commands read its own env
        monkeypatch.setenv(key, agent_env[key])
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "pi"))  # no pi sessions
    kept = (
        Path(agent_env["CLAUDE_CONFIG_DIR"])
        / "projects"
        / re.sub(r"[^A-Za-z0-9]", "-", str(project))
    )
    kept.mkdir(parents=True)
    shutil.copy(SLASH, kept / "9a8b7c6d-1e2f-4a3b-8c9d-0e1f2a3b4c5d.jsonl")
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the first session's view")
        await pilot.press(*"/import", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Import a Claude Code"), "picker")
        seen["options"] = kit.options(app)
        await pilot.press("enter")
        await kit.wait_for(
            pilot,
            lambda: "Fixed: the discount is applied before the total." in kit.assistant_texts(app),
            f"the imported transcript ({kit.toasts(app)})",
        )
        await kit.wait_for(pilot, lambda: _drawn(app), "the transcript drawn")
        seen["session"] = app.client.session.session_id
        seen["toasts"] = kit.toasts(app)
        seen["users"], seen["blocks"] = _shown(app)

    run = await kit.drive(session, keeper(kit, session, agent_env, [], tmp_path), test)
    (option,) = seen["options"]  # the listing of coding-agent import --list
    # its first prompt: the slash command the user typed first, as typed
    assert option.startswith("claude-code") and "   8 messages  /review cart.py\n" in option
    assert str(kept / "9a8b7c6d-1e2f-4a3b-8c9d-0e1f2a3b4c5d.jsonl") in option
    assert run.session is not None and run.switches == 1
    assert seen["session"] == run.session.id != session.id
    assert run.session.cwd == project  # imported into this folder
    assert any(
        f"Imported 8 messages of Claude Code session 9a8b7c6d-1e2f-4a3b-8c9d-0e1f2a3b4c5d into "
        f"session {run.session.id}" in message
        for _, message in seen["toasts"]
    ), seen["toasts"]
    assert "(expanded /review prompt)" in [title for title, _, _ in seen["blocks"]]
    assert "Fix it, please." in seen["users"]


async def test_import_in_a_tui_that_cannot_switch_says_how_to_continue_the_import(
    kit: Any,
    session: Any,
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TUI that starts no workers (it only attaches) cannot show the new session: the import
    stands, and the toast names the command that continues it."""
    from coding_agent.session_files.folders import list_sessions
    from coding_agent.supervisor import WorkerSupervisor

    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    keeper = WorkerSupervisor(session, exit_with_parent=True, env=agent_env)
    await keeper.ensure_started()
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        await pilot.press(*f"/import {SLASH}", "enter")
        await kit.wait_for(
            pilot,
            lambda: any("Continue it with" in m for _, m in kit.toasts(app)),
            f"the way to continue ({kit.toasts(app)})",
        )
        seen["toast"] = next(m for _, m in kit.toasts(app) if "Continue it with" in m)
        seen["shown"] = app.client.session.session_id

    try:
        await kit.drive(session, None, test)
    finally:
        await keeper.stop()
    (new,) = [s for s in list_sessions(project, env=agent_env) if s.id != session.id]
    assert seen["shown"] == session.id  # the TUI stayed where it was
    assert seen["toast"].startswith("Imported 8 messages of Claude Code session 9a8b7c6d-")
    assert f"\nContinue it with: coding-agent --resume {new.id} (" in seen["toast"]


def _hostile_slash_command(tmp_path: Path, project: Path) -> Path:
    """A Claude Code file whose typed command's name is Textual markup with a click action
    and a terminal escape, followed by its expanded prompt (an ``isMeta`` line)."""
    import json

    base = {"cwd": str(project), "sessionId": "hostile", "version": "2.0.55", "type": "user"}
    name = "/[@click=app.simulate_key('y')]review[/]\x1b]0;pwned\x07"
    lines = [
        base
        | {
            "uuid": "h1",
            "parentUuid": None,
            "timestamp": "2026-11-22T09:01:00.000Z",
            "message": {"role": "user", "content": f"<command-name>{name}</command-name>"},
        },
        base
        | {
            "uuid": "h2",
            "parentUuid": "h1",
            "isMeta": True,
            "timestamp": "2026-11-22T09:01:01.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "Review it."}]},
        },
        base
        | {
            "uuid": "h3",
            "parentUuid": "h2",
            "type": "assistant",
            "timestamp": "2026-11-22T09:01:02.000Z",
            "message": {"id": "m1", "role": "assistant", "content": "Reviewed."},
        },
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_an_imported_command_name_in_a_collapsed_line_is_plain_inert_text(
    kit: Any, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """The collapsed line's label names a command from the file: Textual markup in it (a
    ``@click`` action that would press keys in the app when the line is clicked) is shown as
    the characters it is, and an ESC as its escape."""
    from textual.widgets._collapsible import CollapsibleTitle

    from coding_agent.tui.widgets.collapsible import QuietCollapsible

    source = _hostile_slash_command(tmp_path, project)
    session = await import_session(read_session_file(source), cwd=project, env=agent_env)
    seen: dict[str, Any] = {}

    def labels(app: Any) -> list[Any]:
        return [
            block.query_one(CollapsibleTitle).label
            for block in app.transcript.query(QuietCollapsible)
            if block.has_class("meta")
        ]

    async def resumed(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and labels(app), "the collapsed line")
        seen["labels"] = labels(app)

    await kit.drive(session, keeper(kit, session, agent_env, [], tmp_path), resumed)
    (label,) = seen["labels"]
    assert "[@click=app.simulate_key('y')]review[/]" in label.plain
    assert "\\x1b]0;pwned\\x07" in label.plain and "\x1b" not in label.plain
    assert not [span for span in label.spans if "click" in str(span.style)]
