"""The session picker (``/sessions``): rows with name, activity, prompt, model and size; typing
filters by name, id prefix and prompt text; Ctrl+D deletes after a confirmation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chord.textual import ConfirmScreen
from coding_agent.session_files.folders import Session, create_session, list_sessions
from coding_agent.session_files.index import describe, matches, set_session_name

pytestmark = pytest.mark.anyio


async def test_the_picker_filters_and_deletes_after_a_confirmation(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    alpha = create_session(project, env=agent_env)
    set_session_name(alpha, "alpha refactor")
    beta = create_session(project, env=agent_env)
    set_session_name(beta, "beta docs")
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the session's view")
        await pilot.press(*"/sessions", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Sessions of"), "the picker")
        seen["all"] = kit.options(app)
        await pilot.press(*"alprf")  # fuzzy: a-l-p … r-f of "alpha refactor"
        await kit.wait_for(pilot, lambda: len(kit.options(app)) == 1, "the filter")
        seen["filtered"] = kit.options(app)
        # An id prefix: the second's stamp and as many random characters as tell beta from the
        # sessions made in the same second (with one, 2 in 16 runs matched another too).
        others = (alpha.id, session.id)
        prefix = next(
            beta.id[:n]
            for n in range(17, len(beta.id) + 1)
            if not any(other.startswith(beta.id[:n]) for other in others)
        )
        await pilot.press(*(["backspace"] * 5), *prefix)
        await kit.wait_for(pilot, lambda: kit.options(app)[0].startswith(beta.id), "by id")
        seen["by_id"] = kit.options(app)
        await pilot.press("ctrl+d")
        await kit.wait_for(pilot, lambda: kit.dialog_ready(app, ConfirmScreen), "the confirmation")
        seen["question"] = str(app.screen.query_one(".title").render())
        await pilot.press("right", "enter")  # keep it
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Sessions of"), "the picker back")
        assert beta.path.exists()
        await pilot.press("ctrl+d")
        await kit.wait_for(pilot, lambda: kit.dialog_ready(app, ConfirmScreen), "asked again")
        await pilot.press("enter")  # the focused "yes"
        await kit.wait_for(pilot, lambda: not beta.path.exists(), "the session deleted")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Sessions of"), "the picker")
        await pilot.press(*(["backspace"] * 17))
        await kit.wait_for(pilot, lambda: len(kit.options(app)) == 2, "the rest")
        seen["after"] = kit.options(app)
        await pilot.press("escape")

    await kit.drive(session, keeper, test)
    assert len(seen["all"]) == 3
    mine = next(o for o in seen["all"] if o.startswith(session.id))
    assert mine.endswith("(this session)") and "(no prompt yet)" in mine
    assert "just now" in mine and "faux/faux-1 · " in mine and " KB" in mine
    assert seen["filtered"][0].startswith(alpha.id) and "“alpha refactor”" in seen["filtered"][0]
    assert seen["question"] == f"Delete session “beta docs” ({beta.id})?"
    assert {o.split()[0] for o in seen["after"]} == {session.id, alpha.id}
    assert {s.id for s in list_sessions(project, env=agent_env)} == {session.id, alpha.id}


def test_matches_name_id_prefix_and_prompt_words(session: Session) -> None:
    info = describe(session) | {"name": "Fix the parser", "firstPrompt": "Why does the lexer hang?"}
    assert matches(info, "")
    assert matches(info, "fxpars")  # fuzzy on the name
    assert matches(info, session.id[:8])
    assert matches(info, "lexer hang")
    assert not matches(info, "compiler")


async def test_sessions_with_no_prompt_and_no_name_are_left_out_until_searched(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each start of the agent makes a session; started and quit, it has nothing to resume.
    Three such were listed first, above the one with a conversation."""
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    named = create_session(project, env=agent_env)
    set_session_name(named, "kept by its name")
    empties = [create_session(project, env=agent_env) for _ in range(3)]
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the session's view")
        await pilot.press(*"/sessions", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Sessions of"), "the picker")
        seen["all"] = kit.options(app)
        seen["help"] = str(app.screen.query_one("#picker-help").render())
        await pilot.press(*empties[0].id)
        await kit.wait_for(pilot, lambda: len(kit.options(app)) == 1, "the search")
        seen["searched"] = kit.options(app)
        await pilot.press("escape")

    await kit.drive(session, keeper, test)
    assert {o.split()[0] for o in seen["all"]} == {session.id, named.id}
    assert "3 session(s) with no prompt hidden (type an id to find one)" in seen["help"]
    assert seen["searched"][0].startswith(empties[0].id)
