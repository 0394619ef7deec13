"""The app's conversation commands against a real worker (issue 8 §4, §5, §6).

* ``/model`` offers the models the worker knows (its status service) in a picker, switches the
  conversation's model, and the footer shows the new model and its context %.
* ``/fork`` forks at the latest entry and the TUI follows the fork; the next prompt goes there.
* A failed ``--dev`` reload in the worker shows up in the TUI as an error toast.
* ``/sandbox`` shows the OS sandbox's policy; an unavailable sandbox is said once at start and
  by ``/sandbox`` (issue 41).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session
from coding_agent.supervisor import WorkerSupervisor
from coding_agent.tui.widgets.help import TextScreen

pytestmark = pytest.mark.anyio


async def _retype(pilot: Any, app: Any, line: str) -> None:
    """Submit ``line`` in an emptied editor (a refused command's line stays in it)."""
    app.editor.load_text("")
    await pilot.press(*line, "enter")


async def test_model_picker_lists_the_workers_models_and_switches_the_model(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    keeper = WorkerSupervisor(
        session,
        model="faux/faux-big",
        exit_with_parent=True,
        env=agent_env,
        faux_script=kit.script(tmp_path, [], models=kit.FAUX_BIG),
    )
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        client = app.client
        await kit.wait_for(pilot, lambda: kit.idle(app) and client.models, "view and models")
        await pilot.press(*"/model", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Switch the model"), "the picker")
        seen["options"] = kit.options(app)
        await pilot.press("down", "enter")
        await kit.wait_for(
            pilot,
            lambda: app.view["config"].get("model") == {"provider": "faux", "modelId": "faux-1"},
            "the model switch",
        )
        await app.wait_rendered()
        seen["footer"] = str(app.footer.status_line())
        await _retype(pilot, app, "/model nowhere")
        await kit.wait_for(
            pilot, lambda: any("not provider/id" in m for _, m in kit.toasts(app)), "the error"
        )
        # Claude Code's alias (its /model sonnet): refused, naming the ref it means here
        await _retype(pilot, app, "/model sonnet")
        await kit.wait_for(
            pilot, lambda: any("'sonnet' is not" in m for _, m in kit.toasts(app)), "the alias"
        )
        seen["alias"] = next(m for _, m in kit.toasts(app) if "'sonnet' is not" in m)
        # a model the worker does not list (issue 38): refused, naming it and the known ones
        await _retype(pilot, app, "/model faux/nope")
        await kit.wait_for(
            pilot, lambda: any("Unknown model faux/nope" in m for _, m in kit.toasts(app)), "it"
        )
        seen["unknown"] = next(m for _, m in kit.toasts(app) if "Unknown model" in m)
        # a provider without its key: /model names the variable and leaves the model alone
        await _retype(pilot, app, "/model anthropic/claude-sonnet-4-6")
        await kit.wait_for(
            pilot,
            lambda: any("set ANTHROPIC_API_KEY" in m for _, m in kit.toasts(app)),
            "the missing key named",
        )
        seen["kept"] = app.view["config"].get("model")
        await kit.wait_for(pilot, lambda: app.editor.text, "the refused line kept")
        seen["line"] = app.editor.text
        app.editor.load_text("")
        # a conversation on such a model anyway (set by another client): the send says it too
        model = {"provider": "google", "modelId": "gemini-2.5-pro"}
        await client.config_set({"model": model}, BACKGROUND)
        await pilot.press(*"hello", "enter")
        await kit.wait_for(
            pilot,
            lambda: "set GEMINI_API_KEY" in json.dumps(kit.entries(app)),
            "the send's error naming the key",
        )

    await kit.drive(session, keeper, test)
    assert seen["options"][:2] == ["faux/faux-big  (current)", "faux/faux-1"]
    assert "anthropic/…  (not available: set ANTHROPIC_API_KEY)" in seen["options"]
    assert "available are faux/faux-big, faux/faux-1." in seen["unknown"]
    assert seen["alias"].endswith(
        "model 'sonnet' is not provider/id; for Claude Code's 'sonnet': "
        "/model anthropic/claude-sonnet-4-6"
    ), seen["alias"]
    assert seen["kept"] == {"provider": "faux", "modelId": "faux-1"}
    assert seen["line"] == "/model anthropic/claude-sonnet-4-6"  # refused: kept to fix
    assert seen["footer"].startswith("faux/faux-1 ")
    assert "ctx 0%" in seen["footer"]  # faux-1's 200,000-token window is known: % is shown


async def test_fork_follows_the_new_conversation(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    steps = [{"text": "The root answer."}, {"text": "The fork answer."}]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        client = app.client
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        root = client.conversation_id
        await pilot.press(*"one", "enter")
        await kit.wait_for(pilot, lambda: "The root answer." in kit.assistant_texts(app), "one")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the first turn to end")
        last = kit.entries(app)[-1]["id"]
        await pilot.press(*"/fork", "enter")
        await kit.wait_for(pilot, lambda: client.conversation_id != root, "the fork")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the fork's view")
        seen["parent"] = app.view["conversation"].get("parent")
        seen["root"], seen["last"] = root, last
        await pilot.press(*"two", "enter")
        await kit.wait_for(pilot, lambda: "The fork answer." in kit.assistant_texts(app), "two")
        seen["texts"] = kit.assistant_texts(app)

    await kit.drive(session, keeper, test)
    assert seen["parent"] == {"conversationId": seen["root"], "at": seen["last"]}
    assert seen["texts"] == ["The root answer.", "The fork answer."]


PLUGIN = """
from chord import hookimpl


@hookimpl
def chord_facets(host):
    return []
"""


async def test_a_failed_dev_reload_is_shown_as_an_error_toast(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    package = tmp_path / "shouter"
    package.mkdir()
    (package / "__init__.py").write_text('"""A test facet package."""\n')
    (package / "plugin.py").write_text(PLUGIN)
    keeper = WorkerSupervisor(
        session, dev=True, facets_dirs=[package], exit_with_parent=True, env=agent_env
    )

    def failed(app: Any) -> list[str]:
        return [m for s, m in kit.toasts(app) if s == "error" and "Reload of shouter failed" in m]

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.status, "the status")
        assert failed(app) == []
        (package / "plugin.py").write_text("def broken(:\n")
        await kit.wait_for(pilot, lambda: failed(app), "the reload error toast")
        assert "SyntaxError" in failed(app)[0]

    await kit.drive(session, keeper, test)


async def test_compact_says_nothing_to_compact_then_compacts(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """Issue 14 item 6: /compact on a fresh session is one calm line, never "failed
    unexpectedly"; with turns behind it, it compacts (the faux model writes the summary)."""
    steps = [
        {"text": "First answer."},
        {"text": "Second answer."},
        {"text": "Third answer."},
        {"text": "The summary of the conversation so far."},
    ]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"/compact", "enter")
        await kit.wait_for(
            pilot, lambda: any("compact" in m.lower() for _, m in kit.toasts(app)), "the reply"
        )
        seen["fresh"] = kit.toasts(app)
        for number, prompt in enumerate(("one", "two", "three"), 1):
            await pilot.press(*prompt, "enter")
            await kit.wait_for(pilot, lambda n=number: len(kit.assistant_texts(app)) >= n, prompt)
            await kit.wait_for(pilot, lambda: kit.idle(app), f"turn {prompt} to end")
        await app.client.config_set({"keepRecent": 1}, BACKGROUND)  # keep only the last turn
        await pilot.press(*"/compact", "enter")
        await kit.wait_for(
            pilot, lambda: "pi.summary" in kit.kinds(app) and kit.idle(app), "the compaction"
        )
        seen["after"] = kit.toasts(app)

    await kit.drive(session, keeper, test)
    assert seen["fresh"] == [
        (
            "information",
            "Nothing to compact yet: compaction summarises what comes before the newest 20,000 "
            "tokens, which it keeps word for word, and the whole conversation still fits in them",
        )
    ]
    assert ("information", "Compacting the context…") in seen["after"]
    assert not any("failed" in message for _, message in seen["after"])


async def test_sandbox_shows_the_policy_and_an_unavailable_sandbox_is_said_once(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def answered(app: Any) -> bool:  # /sandbox's answer (not the notice at start)
        if isinstance(app.screen, TextScreen):  # the policy, on a screen of its own
            return True
        said = [m for _, m in kit.toasts(app)]
        return any(m.startswith("OS sandbox:") or "Commands run unsandboxed" in m for m in said)

    def noticed(app: Any) -> bool:
        return any("Commands are not sandboxed" in m for _, m in kit.toasts(app))

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.status, "the status")
        await pilot.press(*"/sandbox", "enter")
        await kit.wait_for(pilot, lambda: answered(app), "/sandbox's answer")
        if isinstance(app.screen, TextScreen):
            seen["screen"] = (app.screen.heading, app.screen.text)
            await pilot.press("escape")
        if seen.get("expect_notice"):
            await kit.wait_for(pilot, lambda: noticed(app), "the notice at start")
        seen["toasts"] = [m for _, m in kit.toasts(app)]

    # bubblewrap works here: /sandbox shows when commands run in it and the policy
    keeper = WorkerSupervisor(session, exit_with_parent=True, env=agent_env)
    await kit.drive(session, keeper, test)
    title, shown = seen.pop("screen")  # some forty lines: a scrollable screen, not a toast
    assert title == "OS sandbox" and shown.startswith("OS sandbox:")
    assert not any(m.startswith("OS sandbox:") for m in seen["toasts"])
    assert "the sandbox permission mode (Shift+Tab) runs commands in it" in shown
    assert f"writable: {session.cwd}" in shown and "unreadable: ~/.ssh" in shown
    assert not any("unavailable" in m for m in seen["toasts"])

    # bubblewrap hidden from PATH: said once at start, and by /sandbox
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    hidden = {**agent_env, "PATH": str(bare)}
    keeper = WorkerSupervisor(session, exit_with_parent=True, env=hidden)
    seen["expect_notice"] = True
    await kit.drive(session, keeper, test)
    unavailable = [m for m in seen["toasts"] if "OS sandbox is unavailable" in m]
    assert len(unavailable) == 2  # the notice at start, then /sandbox's answer
    assert all("bubblewrap (bwrap) is not on PATH" in m for m in unavailable)
    assert any("asks as ask mode does" in m for m in unavailable)
