"""docs/authoring-facets.md#6-asking-the-user-keyed-dialogs, executed: the example runs as written.

The guide's block (contract, session facet, TUI facet in one piece) is executed as a module; its
session facet joins pico3's harness session facet with a scripted faux model that calls its
tool, and its TUI facet runs in a real Textual app (Pilot) joined through chord's loopback
source, as the TUI process is joined to the session worker. The user picks the second option
with its number and Enter; the tool's result says so.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.pilot import Pilot

from chord import BACKGROUND, FacetEnvironment, create_facet_host, define_facet
from chord.remote import LoopbackServiceSource
from chord.textual import ChoiceScreen, TextualTui
from chord.textual import tui_facet as chord_tui_facet
from pico3 import HarnessOptions, HarnessService, MemoryStorage, Models, harness_session_facet
from pico3.models import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "authoring-facets.md"
MODEL = {"provider": "faux", "modelId": "faux-1"}


def dialog_example() -> types.ModuleType:
    """The guide's python block that calls ``show_dialogs``, executed as a module."""
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    (block,) = [b for b in blocks if "show_dialogs(" in b]
    module = types.ModuleType("authoring_dialog_example")
    exec(compile(block, f"{GUIDE.name} (keyed dialogs)", "exec"), module.__dict__)
    return module


class DialogApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")


async def until(pilot: Pilot[None], predicate: Callable[[], object]) -> None:
    with anyio.fail_after(20):
        while not predicate():
            await pilot.pause(0.01)


async def test_the_guides_dialog_example_asks_in_a_real_tui_and_the_tool_gets_the_answer() -> None:
    example = dialog_example()
    script = [
        faux_response(faux_tool_call("pick_environment", {}, id="p-1")),
        faux_response("done"),
    ]
    # no approval feature here; the tool is replay="safe" anyway (it only asks)
    options = HarnessOptions(services={"models": Models([FauxProvider(script)])})
    workers: list[Any] = []

    def worker(env: FacetEnvironment) -> None:
        workers.append(env.use(HarnessService))

    app = DialogApp()
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        harness = harness_session_facet(MemoryStorage, options, task_group=group)
        session_facets = [harness, example.session_facet, define_facet("test/worker", worker)]
        async with create_facet_host(session_facets) as session:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config(
                {"model": MODEL, "selectedTools": ["pick_environment"]}, BACKGROUND
            )
            source = LoopbackServiceSource(session.services, task_group=group)
            tui_facets = [chord_tui_facet(app.tui), example.tui_facet]
            async with create_facet_host(tui_facets, service_sources=[source]):
                handle = await root.send("deploy it", BACKGROUND)
                await until(
                    pilot, lambda: isinstance(app.screen, ChoiceScreen) and app.screen.armed
                )
                await pilot.press("2", "enter")  # production
                with anyio.fail_after(20):
                    await handle.wait(BACKGROUND)
            entries = await root.entries(BACKGROUND, limit=100)
            (result,) = [e for e in entries if e.kind == "pi.tool_result"]
            assert result.model[0]["content"][0]["text"] == "The user picked production"
        group.cancel_scope.cancel()
