"""Reading the view document: text, inbox items, usage totals and the footer line."""

from __future__ import annotations

from coding_agent.tui.conversation import SessionInfo
from coding_agent.tui.document import (
    UsageTotals,
    content_text,
    inbox_text,
    model_label,
    turn_model_label,
)
from coding_agent.tui.widgets.footer import StatusFooter, format_tokens
from coding_agent.tui.widgets.tasks import task_summary
from pico3 import QueuedInput, ViewDecoder, view_from_json
from pico3.models import ImageContent, TextContent


def _inbox(item: dict[str, object]) -> QueuedInput:
    return view_from_json({"inbox": [item]}).inbox[0]


def _assistant(entry_id: int, **usage: object) -> dict[str, object]:
    return {
        "id": entry_id,
        "kind": "pi.assistant",
        "model": [{"role": "assistant", "content": [], "usage": usage}],
    }


def test_content_text_reads_strings_and_text_blocks_only() -> None:
    assert content_text("plain") == "plain"
    blocks = [TextContent("a"), ImageContent("...", "image/png"), TextContent("b")]
    assert content_text(blocks) == "a\nb"
    assert content_text(None) == "" and content_text([]) == ""


def test_inbox_text_handles_send_inputs_and_queued_writes() -> None:
    assert inbox_text(_inbox({"id": 1, "mode": "steer", "input": {"content": "go"}})) == "go"
    assert (
        inbox_text(
            _inbox(
                {
                    "id": 2,
                    "mode": "followUp",
                    "input": {"content": [{"type": "text", "text": "later"}]},
                }
            )
        )
        == "later"
    )
    write = {
        "id": 3,
        "mode": "write",
        "entry": {"kind": "pi.notice", "model": [{"role": "user", "content": "build done"}]},
    }
    assert inbox_text(_inbox(write)) == "build done"
    assert inbox_text(_inbox({"id": 4, "mode": "write", "entry": {"kind": "x.mark"}})) == "[x.mark]"


def test_model_label_prefers_the_view_config() -> None:
    view = {"config": {"model": {"provider": "anthropic", "modelId": "claude"}}}
    assert model_label(view, "faux/x") == "anthropic/claude"
    assert model_label({"config": {}}, "faux/x") == "faux/x"
    assert model_label(view_from_json(view), None) == "anthropic/claude"
    assert model_label(None, None) == "no model"


def test_usage_totals_fold_each_entry_once() -> None:
    totals = UsageTotals()
    decoder = ViewDecoder()
    raw = [
        _assistant(1, input=100, output=10, cacheRead=50, cost={"total": 0.5}),
        {
            "id": 2,
            "kind": "pi.usage",
            "data": {"attempt": 1, "error": "overloaded", "usage": {"input": 7, "output": 0}},
        },
        {"id": 3, "kind": "pi.user", "model": [{"role": "user", "content": "hi"}]},
    ]
    entries = [decoder.entry(entry) for entry in raw]
    totals.fold(entries)
    totals.fold(entries)  # already folded: no double counting
    assert (totals.input, totals.output, totals.cache_read) == (107, 10, 50)
    assert totals.cost == 0.5
    assert totals.context_tokens == 7  # the newest request that reported usage
    totals.fold(
        [*entries, decoder.entry(_assistant(4, input=1000, output=24, cost={"total": 0.25}))]
    )
    assert totals.input == 1107 and totals.cost == 0.75 and totals.context_tokens == 1024


def test_a_fresh_context_starts_the_token_counts_over_and_keeps_the_cost() -> None:
    """/new (a pi.reset entry) leaves no old counts in the footer (issue 38 item 7)."""
    totals = UsageTotals()
    decoder = ViewDecoder()
    totals.fold([decoder.entry(_assistant(1, input=100, output=10, cost={"total": 0.5}))])
    assert (totals.input, totals.output, totals.context_tokens) == (100, 10, 110)
    totals.fold([decoder.entry({"id": 2, "kind": "pi.reset"})])
    assert (totals.input, totals.output, totals.context_tokens) == (0, 0, 0)
    assert totals.cost == 0.5
    totals.fold([decoder.entry(_assistant(3, input=20, output=2, cost={"total": 0.25}))])
    assert (totals.input, totals.context_tokens, totals.cost) == (20, 22, 0.75)


def test_footer_shows_model_cwd_session_tokens_cost_and_context_percent() -> None:
    footer = StatusFooter(SessionInfo("abcdef123456", "/srv/project", "faux/x", 10_000))
    view = {"config": {}, "entries": [_assistant(1, input=7000, output=500, cost={"total": 1.5})]}
    decoded = view_from_json(view)
    footer.totals.fold(decoded.entries)  # what show() does, without an app
    footer._view = decoded  # pyright: ignore[reportPrivateUsage]
    line = footer.status_line().plain
    for part in ("faux/x", "/srv/project", "abcdef123456", "↑7.0k", "↓500", "$1.500", "ctx 75%"):
        assert part in line, (part, line)


def test_a_turn_on_a_commands_model_shows_it_in_the_footer_and_under_its_prompt() -> None:
    from rich.text import Text
    from textual.widgets import Static

    from coding_agent.tui.widgets.messages import entry_widget

    footer = StatusFooter(SessionInfo("abcdef123456", "/srv/project", "faux/x", 10_000))
    config = {"model": {"provider": "faux", "modelId": "faux-1"}}
    running = {
        "config": config,
        "turn": {"inputs": [4], "model": {"provider": "faux", "modelId": "faux-big"}},
    }
    assert turn_model_label(running) == "faux/faux-big"
    assert turn_model_label(view_from_json(running)) == "faux/faux-big"
    footer._view = view_from_json(running)  # pyright: ignore[reportPrivateUsage]
    assert footer.status_line(300).plain.startswith("faux/faux-big (this turn)")
    idle = {"config": config}
    assert turn_model_label(idle) is None and turn_model_label(view_from_json(idle)) is None
    footer._view = view_from_json(idle)  # pyright: ignore[reportPrivateUsage]
    assert footer.status_line(300).plain.startswith("faux/faux-1 ")
    user = {"id": 4, "kind": "pi.user", "model": [{"role": "user", "content": "/quick"}]}
    own = ViewDecoder().entry({**user, "data": {"model": "faux/faux-big"}})
    widget = entry_widget(own)
    assert isinstance(widget, Static) and isinstance(widget.content, Text)
    assert widget.content.plain == "/quick\n↳ model for this turn: faux/faux-big"
    plain = entry_widget(ViewDecoder().entry(user))
    assert isinstance(plain, Static) and isinstance(plain.content, Text)
    assert plain.content.plain == "/quick"


def test_format_tokens_and_task_summaries() -> None:
    assert [format_tokens(n) for n in (950, 12_345, 2_500_000)] == ["950", "12.3k", "2.5M"]
    assert task_summary({"phase": "scan", "done": 1, "total": 4}) == "scan · 1/4 (25%)"
    assert task_summary("waiting") == "waiting"
    assert task_summary({"odd": [1, 2]}) == '{"odd": [1, 2]}'


def test_the_footer_keeps_model_cost_and_context_percent_when_narrow() -> None:
    footer = StatusFooter(
        SessionInfo(
            "20261202-001331-5325d2", "/home/someone/projects/a-rather-long-name", "faux/x", 10_000
        )
    )
    view = {"config": {}, "entries": [_assistant(1, input=7000, output=500, cost={"total": 1.5})]}
    decoded = view_from_json(view)
    footer.totals.fold(decoded.entries)
    footer._view = decoded  # pyright: ignore[reportPrivateUsage]
    wide = footer.status_line(300).plain
    assert "20261202-001331-5325d2" in wide and "/home/someone/projects/a-rather-long-name" in wide
    for width in (76, 56, 40):  # an 80- and a 60-column terminal, minus padding; and less
        line = footer.status_line(width).plain
        assert len(line) <= width, (width, line)
        for part in ("faux/x", "$1.500", "ctx 75%"):
            assert part in line, (width, part, line)
    assert "a-rather-long-name" in footer.status_line(76).plain  # shortened before dropped


def test_a_providers_own_search_and_citations_show_in_the_transcript_and_the_export() -> None:
    from coding_agent.session_files.export import _texts  # pyright: ignore[reportPrivateUsage]
    from coding_agent.tui.widgets.messages import server_tool_text
    from pico3.models import Citation, ServerToolContent

    found = [Citation(url="https://a.example/", title="A"), Citation(url="https://b.example/")]
    search = ServerToolContent(id="s1", name="web_search", input={"query": "q"}, results=found)
    assert server_tool_text(search) == (
        "⌕ web_search (by the provider): q\n"
        "  1. A — https://a.example/\n"
        "  2. https://b.example/ — https://b.example/"
    )
    cited = TextContent(
        text="Answer.", citations=[Citation(url="https://a.example/", title="A", cited_text="x")]
    )
    assert list(_texts([search, cited])) == [
        ("text", "Searched the web (web_search): q\n- [A](https://a.example/)\n"
                 "- [https://b.example/](https://b.example/)"),
        ("text", 'Answer.\n\nSources:\n- [A](https://a.example/): "x"'),
    ]  # fmt: skip
