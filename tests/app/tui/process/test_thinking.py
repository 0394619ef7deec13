"""Thinking levels and model switches in the TUI, against a real worker (docs/design/agent.md#features:
thinking levels, a model switch mid-session).

* ``/thinking high`` sets the conversation's ``thinkingLevel``; the footer shows it beside the
  model, and the switch lands in the transcript as a dim marker line.
* ``/thinking`` without a level opens a picker marking the current one; Ctrl+Y steps through
  off → minimal → low → medium → high → xhigh → off.
* A level that does not exist is refused with an error toast naming the levels; nothing changes.
* On a model that cannot reason the toast says so. Ctrl+L opens the model picker; the switch is a
  ``coding-agent.model_change`` entry, rendered as "Model: a → b", there again after the worker
  is killed and restarted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.session_files.folders import Session
from coding_agent.settings.changes import MODEL_CHANGE, THINKING_CHANGE
from coding_agent.supervisor import WorkerSupervisor
from coding_agent.tui.commands.core import model_scope, next_in_scope
from coding_agent.tui.main import run_client

pytestmark = pytest.mark.anyio


def _level(app: Any) -> Any:
    view = app.view
    return view["config"].get("thinkingLevel") if isinstance(view, dict) else None


def _changes(kit: Any, app: Any, kind: str) -> list[dict[str, Any]]:
    return [entry for entry in kit.entries(app) if entry["kind"] == kind]


def _marker(app: Any, entry: dict[str, Any]) -> str | None:
    """The rendered text of ``entry``'s transcript widget (``None`` when it has none)."""
    widget = app.transcript.widget_for(entry["id"])
    return None if widget is None else str(widget.render())


async def test_thinking_high_sets_the_level_the_footer_shows_it_and_a_marker_records_it(
    kit: Any, session: Session, agent_env: dict[str, str]
) -> None:
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.models, "the view")
        await app.wait_rendered()  # the footer paints the view at the render after it came
        seen["footer before"] = str(app.footer.status_line())
        await pilot.press(*"/thinking high", "enter")
        await kit.wait_for(pilot, lambda: _level(app) == "high", "the level to be set")
        await kit.wait_for(pilot, lambda: _changes(kit, app, THINKING_CHANGE), "the entry")
        await app.wait_rendered()
        seen["footer"] = str(app.footer.status_line())
        seen["entries"] = _changes(kit, app, THINKING_CHANGE)
        seen["marker"] = _marker(app, seen["entries"][0])
        seen["toasts"] = kit.toasts(app)

    await kit.drive(session, keeper, test)
    assert seen["footer before"].startswith("faux/faux-1  ")  # off is not shown
    assert seen["footer"].startswith("faux/faux-1 · thinking high ")
    assert [e["data"] for e in seen["entries"]] == [{"from": "off", "to": "high"}]
    assert seen["marker"] == "Thinking: off → high"
    assert ("information", "Thinking: high") in seen["toasts"]  # faux-1 can reason: no warning


async def test_a_level_that_does_not_exist_is_refused_and_changes_nothing(
    kit: Any, session: Session, agent_env: dict[str, str]
) -> None:
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        await pilot.press(*"/thinking huge", "enter")
        await kit.wait_for(
            pilot, lambda: any(s == "error" for s, _ in kit.toasts(app)), "the error toast"
        )
        # The refused line stays to be fixed in place; the fixed one is carried out after
        # the refused one: nothing was queued.
        await kit.wait_for(pilot, lambda: app.editor.text == "/thinking huge", "the line kept")
        await pilot.press(*["backspace"] * len("huge"), *"low", "enter")
        await kit.wait_for(pilot, lambda: _changes(kit, app, THINKING_CHANGE), "the valid one")
        seen["errors"] = [m for s, m in kit.toasts(app) if s == "error"]
        seen["entries"] = _changes(kit, app, THINKING_CHANGE)

    await kit.drive(session, keeper, test)
    assert seen["errors"] == [
        "/thinking: there is no level 'huge'; use one of off, minimal, low, medium, high, xhigh"
    ]
    assert [e["data"] for e in seen["entries"]] == [{"from": "off", "to": "low"}]


async def test_the_picker_marks_the_current_level_and_ctrl_y_cycles_back_to_off(
    kit: Any, session: Session, agent_env: dict[str, str]
) -> None:
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        await pilot.press(*"/thinking", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Thinking level"), "the picker")
        seen["options"] = kit.options(app)
        await pilot.press(*["down"] * 4, "enter")  # high
        await kit.wait_for(pilot, lambda: _level(app) == "high", "high")
        for expected in ("xhigh", "off", "minimal"):
            await pilot.press("ctrl+y")
            await kit.wait_for(pilot, lambda e=expected: _level(app) == e, f"ctrl+y: {expected}")
        await kit.wait_for(
            pilot, lambda: len(_changes(kit, app, THINKING_CHANGE)) == 4, "four entries"
        )
        seen["entries"] = _changes(kit, app, THINKING_CHANGE)

    await kit.drive(session, keeper, test)
    assert seen["options"] == ["off  (current)", "minimal", "low", "medium", "high", "xhigh"]
    assert [(e["data"]["from"], e["data"]["to"]) for e in seen["entries"]] == [
        ("off", "high"),
        ("high", "xhigh"),
        ("xhigh", "off"),
        ("off", "minimal"),
    ]


async def test_ctrl_l_switches_the_model_and_the_marker_survives_a_worker_restart(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # faux-big is a faux model the script declares: it cannot reason.
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
        await pilot.press(*"/thinking medium", "enter")
        await kit.wait_for(
            pilot, lambda: any(s == "warning" for s, _ in kit.toasts(app)), "the warning"
        )
        seen["warning"] = next(m for s, m in kit.toasts(app) if s == "warning")
        await pilot.press("ctrl+l")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Switch the model"), "the picker")
        await pilot.press("down", "enter")  # faux-1
        await kit.wait_for(pilot, lambda: _changes(kit, app, MODEL_CHANGE), "the model entry")
        await app.wait_rendered()
        entry = _changes(kit, app, MODEL_CHANGE)[0]
        seen["data"], seen["marker"] = entry["data"], _marker(app, entry)

        kit.kill_worker(keeper)
        await kit.wait_for(pilot, lambda: client.attachments == 2, "the reconnected view")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view after the restart")
        await app.wait_rendered()
        seen["after"] = _changes(kit, app, MODEL_CHANGE)
        seen["marker after"] = _marker(app, seen["after"][0])
        seen["footer"] = str(app.footer.status_line())

    await kit.drive(session, keeper, test)
    assert seen["warning"] == (
        "Thinking: medium — faux/faux-big does not support reasoning; "
        "the level applies once you switch to a model that does"
    )
    assert seen["data"] == {"from": "faux/faux-big", "to": "faux/faux-1"}
    assert seen["marker"] == "Model: faux/faux-big → faux/faux-1"
    assert [e["data"] for e in seen["after"]] == [seen["data"]]  # once, not again at hydrate
    assert seen["marker after"] == seen["marker"]
    assert seen["footer"].startswith("faux/faux-1 · thinking medium ")


def _config_model(app: Any) -> str | None:
    view = app.view
    model = view["config"].get("model") if isinstance(view, dict) else None
    return f"{model['provider']}/{model['modelId']}" if isinstance(model, dict) else None


async def test_ctrl_p_cycles_the_models_of_the_models_scope(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    keeper = WorkerSupervisor(
        session,
        model="faux/faux-big",
        exit_with_parent=True,
        env=agent_env,
        faux_script=kit.script(tmp_path, [], models=kit.FAUX_BIG),
    )
    seen: list[str | None] = []

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.models, "view and models")
        seen.append(_config_model(app))
        for expected in ("faux/faux-1", "faux/faux-big", "faux/faux-1"):
            await pilot.press("ctrl+p")
            await kit.wait_for(pilot, lambda e=expected: _config_model(app) == e, expected)
            seen.append(_config_model(app))
        pilot.app.exit()

    with anyio.fail_after(240):
        await run_client(
            session,
            supervisor=keeper,
            models=["faux/faux-1", "faux/faux-b*"],
            headless=True,
            size=(100, 30),
            auto_pilot=test,
        )
    assert seen == ["faux/faux-big", "faux/faux-1", "faux/faux-big", "faux/faux-1"]


def test_the_model_scope_follows_the_patterns_and_cycling_wraps() -> None:
    known = ["anthropic/claude-a", "openai/gpt-5", "openai/gpt-4o", "faux/faux-1"]
    assert model_scope(known, []) == known
    assert model_scope(known, ["openai/gpt-5*", "anthropic/*", "*/gpt-*"]) == [
        "openai/gpt-5",
        "anthropic/claude-a",
        "openai/gpt-4o",
    ]
    assert model_scope(known, ["nothing/*"]) == []
    scope = ["a/1", "b/2", "c/3"]
    assert [next_in_scope(scope, m) for m in scope] == ["b/2", "c/3", "a/1"]
    assert next_in_scope(scope, "z/9") == "a/1"  # outside the scope: its first model
    assert next_in_scope(["a/1"], "a/1") is None
    assert next_in_scope([], "a/1") is None
