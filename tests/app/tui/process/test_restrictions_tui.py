"""Claude Code's restrictive switches in the real TUI over a real worker (Pilot): with
``permissions.denyInsteadOfPrompting`` a call that would ask is refused and no dialog opens
(the turn goes on to the model's answer); with ``permissions.disableBypassPermissionsMode``
Shift+Tab passes over ``auto`` with a notice naming the file, and ``/mode auto`` is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_agent.session_files.folders import Session
from facets_approval.tui import MODE_PANEL_ID

pytestmark = pytest.mark.anyio


def shown_mode(app: Any) -> str | None:
    found = app.query(f"#{MODE_PANEL_ID}")  # the facet's class is a private generation's: by id
    return getattr(found.first(), "permission_mode", None) if found else None


async def test_a_call_that_would_ask_is_refused_without_a_dialog_and_auto_is_skipped(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", agent_env["CLAUDE_CONFIG_DIR"])  # this TUI's too
    settings = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    switches = {"disableBypassPermissionsMode": "disable", "denyInsteadOfPrompting": True}
    settings.write_text(json.dumps({"permissions": switches}))
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
        {"text": "I could not run it."},
    ]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))
    seen: dict[str, Any] = {"dialog": False}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await kit.wait_for(pilot, lambda: shown_mode(app) == "ask", "the mode label")
        await pilot.press(*"touch it", "enter")

        def answered() -> bool:
            seen["dialog"] = seen["dialog"] or kit.dialog_ready(app)
            return "I could not run it." in kit.assistant_texts(app)

        await kit.wait_for(pilot, answered, "the answer after the refusal")
        seen["results"] = [r["content"][0]["text"] for r in kit.tool_results(app)]
        seen["screen"] = app.screen is app.screen_stack[0]
        for mode in ("accept-edits", "sandbox", "plan", "ask"):  # plan → ask: auto is passed over
            await pilot.press("shift+tab")
            await kit.wait_for(pilot, lambda m=mode: shown_mode(app) == m, f"the {mode} label")
        seen["toasts"] = kit.toasts(app)
        await pilot.press(*"/mode auto", "enter")
        await kit.wait_for(
            pilot, lambda: any("/mode" in m for _s, m in kit.toasts(app)), "the refusal"
        )
        seen["refusal"] = [m for _s, m in kit.toasts(app) if "/mode" in m]
        seen["mode"] = shown_mode(app)

    await kit.drive(session, keeper, test)
    assert not seen["dialog"] and seen["screen"]  # no dialog ever opened
    assert not (project / "ran.txt").exists()
    (result,) = seen["results"]
    assert "bash was not run: it needs approval, and permissions.denyInsteadOfPrompting in " \
        f"{settings} refuses such calls instead of asking anyone." in result  # fmt: skip
    skipped = [m for _s, m in seen["toasts"] if m.startswith("Skipped auto:")]
    assert skipped == [
        "Skipped auto: the auto permission mode is disabled by "
        f"permissions.disableBypassPermissionsMode in {settings}; use ask, accept-edits, "
        "sandbox or plan"
    ]
    assert any(str(settings) in m for m in seen["refusal"])
    assert seen["mode"] == "ask"
