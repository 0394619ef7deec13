"""The TUI's start-up collector pause ends once its first frame is painted (issue 38, start-up).

The command line keeps the cycle collector off from its start (``gc_policy.pause_for_start_up``):
everything a TUI imports and builds before its first frame lives as long as the process, so
collections then free nothing. ``run_client(on_painted=...)`` is where the command line ends the
pause: once, after the first frame, with the TUI's facets loaded; the app then runs with the
collector on.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import anyio
import pytest

from coding_agent.session_files.folders import Session
from coding_agent.tui.main import run_client
from coding_agent.worker.gc_policy import pause_for_start_up, start_up_done

pytestmark = pytest.mark.anyio


async def test_the_start_up_pause_ends_once_after_the_first_frame(
    kit: Any, session: Session, agent_env: dict[str, str]
) -> None:
    keeper = kit.supervisor(session, agent_env)
    calls: list[dict[str, bool]] = []
    seen: dict[str, Any] = {}

    def painted() -> None:
        calls.append(
            {
                "collector was off": not gc.isenabled(),
                # the commands' modules load with the facets, just before
                "facets loaded": "coding_agent.tui.commands.prompts" in sys.modules,
            }
        )
        start_up_done(freeze=False)

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: calls, "the end of the start-up pause")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        seen["editor"] = app.editor.is_mounted
        seen["collector on"] = gc.isenabled()
        app.exit()

    pause_for_start_up()
    try:
        assert not gc.isenabled()
        with anyio.fail_after(kit.TIMEOUT * 4):
            await run_client(
                session,
                supervisor=keeper,
                headless=True,
                size=(110, 45),
                auto_pilot=test,
                on_painted=painted,
            )
    finally:
        start_up_done(freeze=False)
    assert calls == [{"collector was off": True, "facets loaded": True}]
    assert seen == {"editor": True, "collector on": True}
