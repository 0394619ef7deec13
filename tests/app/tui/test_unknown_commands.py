"""An unknown ``/command`` in the real app's editor (Textual Pilot): the toast says what does
its job here for a Claude Code or pi habit (``/clear``, ``/exit``), or the closest commands for a
typo, and the typed text is back in the editor."""

from __future__ import annotations

import pytest

from coding_agent.tui import CodingAgentApp

pytestmark = pytest.mark.anyio


def _toasts(app: CodingAgentApp) -> list[str]:
    return [str(toast.message) for toast in app._notifications]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("/clear", "Unknown command /clear: /new starts a fresh context"),
        ("/exit", "Unknown command /exit: /quit leaves"),
        ("/login", "there is no login: set ANTHROPIC_API_KEY"),
        ("/hlep", "Unknown command /hlep; did you mean /help?"),
    ],
)
async def test_an_unknown_command_names_what_to_use_instead(
    conversation, docs, typed: str, said: str
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press(*typed)
        await docs.until(pilot, lambda: app.editor.text == typed)
        await pilot.press("enter")
        await docs.until(pilot, lambda: bool(_toasts(app)))
        [toast] = _toasts(app)
        assert said in toast, toast
        assert app.editor.text == typed, "the text is back in the editor"
        assert conversation.sent == [], "nothing was sent to the model"
