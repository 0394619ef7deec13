"""A provider's own web search in the TUI (issue 44 deliver 4): the search and its sources show
in the answer, the cited text renders as text, and nothing else of the answer is lost."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Static

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.widgets import AssistantView

pytestmark = pytest.mark.anyio


async def test_a_stored_answer_with_the_providers_search_shows_it(conversation, docs) -> None:
    search = {
        "type": "serverTool",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "python 3.13 release"},
        "results": [{"url": "https://docs.python.org/3/whatsnew/3.13.html", "title": "What's New"}],
        "blocks": [{"type": "server_tool_use", "id": "srvtoolu_01"}],
    }
    cited = {
        "type": "text",
        "text": "It came out in **October 2024**.",
        "citations": [{"url": "https://docs.python.org/3/whatsnew/3.13.html"}],
    }
    answer = docs.assistant_message(docs.text_block("Searching."), search, cited)

    def add(doc: Any) -> None:
        doc["entries"].append(docs.user_entry(1, "when?"))
        doc["entries"].append(docs.assistant_entry(2, answer))

    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        conversation.change(add)
        await app.wait_rendered()
        await pilot.pause()
        widget = app.transcript.widget_for(2)
        assert isinstance(widget, AssistantView)
        await widget.stop_streams()
        shown = [str(w.render()) for w in widget.query(Static) if "dim-line" in w.classes]
        assert (
            "⌕ web_search (by the provider): python 3.13 release\n"
            "  1. What's New — https://docs.python.org/3/whatsnew/3.13.html"
        ) in shown
        assert widget.text == "Searching.\nIt came out in **October 2024**."
