"""``/add-dir DIR`` in the real TUI against a real worker, driven with Textual's Pilot: the top
line, which names the working folders, names the added one at once (not at the next start)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from coding_agent.session_files.folders import Session, load_session

pytestmark = pytest.mark.anyio


def _top_line(app: Any) -> str:
    return str(app.query_one("#welcome", Static).render()).splitlines()[0]


async def test_add_dir_names_the_folder_on_the_top_line_at_once(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the session's view")
        seen["before"] = _top_line(app)
        await pilot.press(*f"/add-dir {notes}", "enter")
        await kit.wait_for(
            pilot,
            lambda: any("as a working directory" in m for _, m in kit.toasts(app)),
            f"the command's answer ({kit.toasts(app)})",
        )
        await kit.wait_for(pilot, lambda: "notes" in _top_line(app), "the top line to name it")
        seen["after"] = _top_line(app)

    await kit.drive(session, kit.supervisor(session, agent_env), test)
    assert load_session(session.path).settings.add_dirs == (str(notes),)
    assert " + " not in seen["before"]
    assert seen["after"].endswith(f" + {notes}")  # short_cwd: outside home, the whole path
