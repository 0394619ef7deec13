"""The app's command tables (``coding_agent.tui.commands``): handlers called directly, with no
TUI, and the one error report seen through the real app's editor (Textual Pilot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from chord.textual import ArgumentError, CommandError, register_commands
from coding_agent.session_files.folders import Session, create_session
from coding_agent.session_files.index import session_name
from coding_agent.tui import CodingAgentApp
from coding_agent.tui.commands import core, sessions, tree
from coding_agent.tui.commands.trust import TRUST_COMMANDS, TrustTarget

pytestmark = pytest.mark.anyio


class Toasts:
    """What a handler may say on the side (``notify``); nothing here is a Textual app."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []

    def notify(self, message: str, *, severity: str = "information") -> None:
        self.said.append((severity, message))


class Here:
    """The session control ``/name`` needs: the session the TUI shows."""

    def __init__(self, session: Session) -> None:
        self.session = session


def _sessions_target(session: Session) -> sessions.SessionsTarget:
    here: Any = Here(session)
    toasts: Any = Toasts()
    return sessions.SessionsTarget(here, toasts, None, session.cwd)


async def test_the_name_handler_names_the_session_without_a_tui(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    session = create_session(project, env=agent_env)
    target = _sessions_target(session)
    (name,) = [c for c in sessions.SESSION_COMMANDS if c.name == "name"]

    said = await name.run(target, "  greeting   fix ", BACKGROUND)
    assert said == "Session name: greeting fix"
    assert session_name(session) == "greeting fix"

    assert sessions.name(target, name.parse(""), BACKGROUND) == "Session name removed"
    assert session_name(session) is None

    with pytest.raises(CommandError, match=r"^/name: a session name has at most"):
        sessions.name(target, name.parse("x" * 500), BACKGROUND)
    assert session_name(session) is None  # nothing half-written


def test_the_app_tables_declare_their_arguments() -> None:
    with pytest.raises(ArgumentError, match="there is no level 'huge'"):
        core.THINKING.parse("huge")
    assert core.THINKING.parse("")["level"] == ""  # no level: the picker
    assert core.COMPACT.parse("keep the  plan")["instructions"] == "keep the  plan"
    with pytest.raises(ArgumentError, match=r"^/branch needs N: /branch N$"):
        tree.BRANCH.parse("")
    assert {c.name for c in tree.TREE_COMMANDS} == {"tree", "label", "rewind", "export", "branch"}
    (export,) = [c for c in tree.TREE_COMMANDS if c.name == "export"]
    assert export.usage == "/export [FILE.html|FILE.jsonl]"


class _GoneWorker:
    """A tree service whose worker went away mid-session."""

    async def outline(self, ctx: Context) -> Any:
        raise ConnectionError("the worker went away")


def _tree_target(app: CodingAgentApp) -> tree.TreeTarget:
    host = tree.TreeHost(
        conversation_id=lambda: 1,
        follow=lambda branch: None,
        busy=lambda: False,
        restore_prompt=lambda text: None,
        show_screen=app.push_screen_wait,
    )
    return tree.TreeTarget(host, app.tui, _GoneWorker())


async def test_typed_commands_fail_with_one_kind_of_toast(
    conversation: Any, docs: Any, tmp_path: Path
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        register_commands(app.tui, tree.TREE_COMMANDS, _tree_target(app))
        environ = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        register_commands(app.tui, TRUST_COMMANDS, TrustTarget(app.tui, tmp_path, environ))

        said_all: list[tuple[str, str]] = []
        shown = app.tui.notify

        def notify(message: str, *, severity: Any = "information") -> None:
            said_all.append((severity, message))  # toasts expire; the test keeps every one
            shown(message, severity=severity)

        app.tui.notify = notify  # type: ignore[method-assign]

        def errors() -> list[str]:
            return [message for severity, message in said_all if severity == "error"]

        for line, said in [
            # any exception: its type, message and where the command's code raised it
            (
                "/tree",
                "/tree failed: ConnectionError: the worker went away "
                f"(tui/test_command_tables.py:{_GoneWorker.outline.__code__.co_firstlineno + 1}"
                " in outline)",
            ),
            ("/branch seven", "/branch needs a branch number: /branch N (see /tree)"),  # refusal
            ("/label", "/label needs NAME: /label NAME"),  # the declared arguments
            ("/trust now", "/trust takes no arguments: /trust"),
        ]:
            app.editor.clear()
            await pilot.press(*line)
            await docs.until(
                pilot, lambda t=line: app.editor.palette.display or app.editor.text == t
            )
            await pilot.press("escape")  # close the palette, so Enter sends the line as typed
            await docs.until(pilot, lambda: not app.editor.palette.display)
            await pilot.press("enter")
            await docs.until(pilot, lambda m=said: m in errors())
        assert app.is_running
        assert len(errors()) == 4
        help_text = app.help_text()
        assert "/export [FILE.html|FILE.jsonl] — Export this branch" in help_text
        assert "/branch N — Switch to a branch (see /tree)" in help_text
        assert "/quit — Leave the app (the session keeps running)" in help_text


def test_cost_sums_this_branchs_usage_from_the_typed_view() -> None:
    """``/cost`` (the architecture page's worked example): the tokens and dollars of every
    model call of the branch, read from pico3's typed view records."""
    from pico3 import view_from_json
    from tests.app.tui.conftest import (
        assistant_entry,
        assistant_message,
        empty_view,
        text_block,
        user_entry,
    )

    def usage(input: int, output: int, total: float) -> dict[str, Any]:
        cost = {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": total}
        return {"input": input, "output": output, "cacheRead": 100, "cacheWrite": 0,
                "totalTokens": input + output + 100, "cost": cost}  # fmt: skip

    view = empty_view([
        user_entry(1, "hi"),
        assistant_entry(2, assistant_message(text_block("a"), usage=usage(1000, 50, 0.0123))),
        user_entry(3, "again"),
        assistant_entry(4, assistant_message(text_block("b"), usage=usage(2000, 70, 0.0200))),
    ])  # fmt: skip
    said = core.cost_text(view_from_json(view))
    assert said == (
        "This branch: $0.0323 over 2 model calls\n"
        "tokens: 3,000 input, 120 output, 200 cache read, 0 cache write\n"
        "context: 2,170 tokens in the last request, as the provider reported them (the "
        "footer's ctx %; /context estimates the whole window)"
    )
    assert core.cost_text(view_from_json(empty_view())) == (
        "No model call yet: nothing has cost anything."
    )
    assert [c.name for c in core.COMMANDS if c.name == "cost"] == ["cost"]


class _SandboxClient:
    """The worker status ``/sandbox`` reads: an available sandbox and ``policy``."""

    def __init__(self, policy: list[str]) -> None:
        said = {"available": True, "reason": "bubblewrap", "enforced": False, "policy": policy}
        self.status: dict[str, Any] = {"sandbox": said}


async def test_sandbox_shows_its_policy_on_a_scrollable_screen_not_a_toast(
    conversation: Any, docs: Any, tmp_path: Path
) -> None:
    """The policy is some forty lines: a toast was cut at the bottom of the terminal and could
    not scroll. It opens a screen as ``/help`` does, whose last line can be scrolled to."""
    from coding_agent.settings.sandbox import sandbox_policy
    from coding_agent.tui.widgets.help import TextScreen

    policy = sandbox_policy(tmp_path, "s", env={"HOME": str(tmp_path / "home")}).describe()
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await app.wait_rendered()
        client: Any = _SandboxClient(policy)
        target = core.ConversationTarget(client, app.tui, show_text=app.show_text)
        register_commands(app.tui, [core.SANDBOX], target)
        await pilot.press(*"/sandbox", "enter")
        await docs.until(pilot, lambda: isinstance(app.screen, TextScreen))
        screen: Any = app.screen
        assert screen.text.splitlines()[1:] == policy
        assert screen.text.startswith("OS sandbox: bubblewrap; the sandbox permission mode")
        assert not app._notifications, "no toast besides the screen"
        scroll = screen.query_one("#help-scroll")
        await pilot.pause()
        assert scroll.max_scroll_y > 0, "longer than the screen"
        await pilot.press("end")
        await docs.until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y)
        await pilot.press("escape")
        await docs.until(pilot, lambda: not isinstance(app.screen, TextScreen))

        client.status = {"sandbox": {"available": False, "reason": "no bwrap"}}
        await pilot.press(*"/sandbox", "enter")
        await docs.until(pilot, lambda: bool(app._notifications))
        assert "The OS sandbox is unavailable: no bwrap" in str(
            next(iter(app._notifications)).message
        )
        assert not isinstance(app.screen, TextScreen), "a one-line warning stays a toast"


async def test_help_lists_a_skill_under_its_two_names_once(conversation, docs) -> None:
    """A Claude Code user's skills run as ``/NAME`` and ``/skill:NAME``: ``/help`` lists each
    once (its long description too), naming the other name, as the palette shows it once; a
    command that only shares a last part keeps its own line."""

    async def run(args: str, ctx: Context) -> None:
        del args, ctx

    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)):
        await app.wait_rendered()
        about = "Debug complex issues using competing hypotheses"
        app.tui.register_command("parallel-debugging", about, run)
        app.tui.register_command("skill:parallel-debugging", about, run)
        app.tui.register_command("team:parallel-debugging", "Something else", run)
        help_lines = app.help_text().splitlines()
        assert [line for line in help_lines if about in line] == [
            f"/parallel-debugging (also /skill:parallel-debugging) — {about}"
        ]
        assert "/team:parallel-debugging — Something else" in help_lines
        assert "/quit — Leave the app (the session keeps running)" in help_lines
