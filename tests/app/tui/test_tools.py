"""Tool calls render with their arguments, live slot status, results and edit diffs."""

from __future__ import annotations

from typing import Any

import pytest

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.widgets.collapsible import QuietCollapsible
from coding_agent.tui.widgets.tools import diff_text, edit_preview

pytestmark = pytest.mark.anyio

DIFF = " 1 def greet():\n-2     return 'hi'\n+2     return 'hello'\n 3 "


async def test_tool_call_shows_arguments_status_and_edit_diff(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    call = {
        "type": "toolCall",
        "id": "call_1",
        "name": "edit",
        "arguments": {
            "path": "src/app.py",
            "edits": [{"oldText": "return 'hi'", "newText": "return 'hello'"}],
        },
    }
    bash = {
        "type": "toolCall",
        "id": "call_2",
        "name": "bash",
        "arguments": {"command": "pytest -q", "timeout": 60},
    }
    async with app.run_test(size=(110, 50)):
        await app.wait_rendered()

        def tool_turn(doc: Any) -> None:
            doc["entries"].append(docs.user_entry(1, "fix greet"))
            doc["entries"].append(
                docs.assistant_entry(
                    2,
                    docs.assistant_message(
                        docs.text_block("I'll edit it."), call, bash, stop="toolUse"
                    ),
                )
            )
            doc["turn"] = {
                "inputs": [1],
                "tools": [
                    {
                        "callId": "call_1",
                        "name": "edit",
                        "args": call["arguments"],
                        "status": "pending",
                        "waitingOn": "approval",
                    },
                    {
                        "callId": "call_2",
                        "name": "bash",
                        "args": bash["arguments"],
                        "status": "running",
                        "output": "collecting...\n3 passed",
                    },
                ],
            }

        conversation.change(tool_turn)
        await app.wait_rendered()
        edit_card = app.transcript.card("call_1")
        bash_card = app.transcript.card("call_2")
        assert edit_card is not None and bash_card is not None
        header = edit_card.header_text
        assert "edit" in header and "src/app.py" in header and "waiting on approval" in header
        preview = edit_card.args_text
        assert "-return 'hi'" in preview and "+return 'hello'" in preview
        assert bash_card.status == "running"
        assert "3 passed" in bash_card.live_text
        assert bash_card.header_text.endswith("bash: pytest -q  (timeout 60s)")
        assert bash_card.args_text == ""  # the header says it all: no raw JSON

        def results(doc: Any) -> None:
            doc["entries"].append(
                docs.tool_result_entry(
                    3,
                    "call_1",
                    "edit",
                    "Successfully replaced 1 block in src/app.py.",
                    details={"diff": DIFF, "path": "src/app.py"},
                )
            )
            doc["entries"].append(
                docs.tool_result_entry(4, "call_2", "bash", "error: exit code 1", is_error=True)
            )
            doc["turn"]["tools"][0]["status"] = "done"
            doc["turn"]["tools"][1]["status"] = "error"

        conversation.change(results)
        await app.wait_rendered()
        assert edit_card.status == "done" and bash_card.status == "error"
        assert edit_card.has_class("has-diff")
        assert "+2     return 'hello'" in edit_card.result_text
        assert "-2     return 'hi'" in edit_card.result_text
        assert "exit code 1" in bash_card.result_text and bash_card.has_class("is-error")
        # results join their cards: no standalone widget for entries 3 and 4
        assert app.transcript.widget_for(3) is None and app.transcript.widget_for(4) is None
        assert app.transcript.rendered_ids == [1, 2, 3, 4]


async def test_ctrl_o_toggles_collapsible_output(conversation, docs) -> None:
    long_output = "\n".join(f"line {i}" for i in range(40))
    call = {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a.txt"}}
    conversation.change(
        lambda doc: doc["entries"].extend(
            [
                docs.assistant_entry(1, docs.assistant_message(call, stop="toolUse")),
                docs.tool_result_entry(2, "c", "read", long_output),
            ]
        )
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        card = app.transcript.card("c")
        assert card is not None
        box = card.query_one(".tool-output-box")
        assert box.collapsed, "long output starts collapsed"  # type: ignore[attr-defined]
        await pilot.press("ctrl+o")
        assert not box.collapsed  # type: ignore[attr-defined]
        await pilot.press("ctrl+o")
        assert box.collapsed  # type: ignore[attr-defined]


async def test_ctrl_o_also_opens_and_folds_imported_lines_the_user_did_not_type(
    conversation, docs
) -> None:
    """An imported session's collapsed meta lines (``(expanded /review prompt)``,
    ``(compaction summary)``) open and fold with Ctrl+O, as all collapsed output does."""
    expanded = docs.user_entry(1, "Review cart.py for bugs.") | {
        "data": {"meta": "expanded /review prompt"}
    }
    summary = docs.user_entry(2, "The user asked for a review.") | {
        "data": {"meta": "compaction summary"}
    }
    conversation.change(lambda doc: doc["entries"].extend([expanded, summary]))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        lines = list(app.transcript.query(".summary.meta").results(QuietCollapsible))
        assert [str(line.title) for line in lines] == [
            "(expanded /review prompt)",
            "(compaction summary)",
        ]
        assert all(line.collapsed for line in lines)
        await pilot.press("ctrl+o")
        assert not any(line.collapsed for line in lines)
        await pilot.press("ctrl+o")
        assert all(line.collapsed for line in lines)


def test_diff_text_colours_added_and_removed_lines() -> None:
    text = diff_text(DIFF)
    styles = {str(span.style) for span in text.spans}
    assert {"green", "red", "dim"} <= styles
    assert text.plain == DIFF.rstrip("\n") or text.plain.splitlines() == DIFF.splitlines()


def test_edit_preview_accepts_both_argument_shapes() -> None:
    assert edit_preview({"oldText": "a", "newText": "b"}) == "-a\n+b"
    assert (
        edit_preview(
            {"edits": [{"oldText": "x", "newText": "y"}, {"oldText": "p", "newText": "q"}]}
        )
        == "-x\n+y\n@@\n-p\n+q"
    )
    assert edit_preview({"path": "f"}) is None


def test_tool_titles_speak_each_tools_terms() -> None:
    from coding_agent.tui.widgets.tools import diff_counts, tool_title

    assert tool_title("read", {"path": "src/x.py", "offset": 10, "limit": 71}) == (
        "read src/x.py:10-80"
    )
    assert tool_title("read", {"path": "src/x.py"}) == "read src/x.py"
    assert tool_title("bash", {"command": "pytest -q\necho more"}) == "bash: pytest -q"
    edit = {"path": "src/x.py", "edits": [{"oldText": "a", "newText": "b\nc\nd"}]}
    assert tool_title("edit", edit) == "edit src/x.py (+3 −1)"
    # a replacement that keeps its two lines and adds four is what its diff is: +4 −0
    kept = {"path": "n.md", "edits": [{"oldText": "a\nb", "newText": "a\n1\n2\nb\n3\n4"}]}
    assert tool_title("edit", kept) == "edit n.md (+4 −0)"
    assert tool_title("edit", edit, diff_counts("--- a\n+++ b\n@@\n-x\n-y\n+z")) == (
        "edit src/x.py (+1 −2)"
    )
    assert tool_title("write", {"path": "n.md", "content": "1\n2\n"}) == "write n.md (2 lines)"
    assert tool_title("grep", {"pattern": "TODO", "path": "src"}) == 'grep "TODO" in src'
    assert tool_title("ask_user", {"question": "Which?", "options": ["a"]}) == "ask_user: Which?"
    assert tool_title("mystery", {"n": 1}) == 'mystery {"n": 1}'
    todos = [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]
    assert tool_title("todo", {"todos": todos}) == "todo (1/2 done)"
    assert tool_title("web_fetch", {"url": "https://example.com/x"}) == (
        "web_fetch: https://example.com/x"
    )
    assert tool_title("web_search", {"query": "textual pilot"}) == "web_search: textual pilot"


async def test_a_tool_without_its_own_title_lists_its_other_arguments_not_json(
    conversation, docs
) -> None:
    from coding_agent.tui import CodingAgentApp

    call = {
        "type": "toolCall",
        "id": "q1",
        "name": "question",
        "arguments": {"question": "Which topic?", "options": ["Testing", "Docs"]},
    }
    conversation.change(
        lambda doc: doc["entries"].append(docs.assistant_entry(1, docs.assistant_message(call)))
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)):
        await app.wait_rendered()
        card = app.transcript.card("q1")
        assert card is not None
        assert card.header_text.endswith("question: Which topic?")
        assert card.args_text == "options: Testing · Docs · or an answer of your own"


async def test_a_question_card_says_in_words_whether_a_typed_answer_was_accepted(
    conversation, docs
) -> None:
    """The tool's ``allowText`` flag is never shown raw: ``false`` reads "only these"."""
    from coding_agent.tui import CodingAgentApp

    arguments = {"question": "Which colour?", "options": ["Red", "Blue"], "allowText": False}
    call = {"type": "toolCall", "id": "q2", "name": "question", "arguments": arguments}
    conversation.change(
        lambda doc: doc["entries"].append(docs.assistant_entry(1, docs.assistant_message(call)))
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)):
        await app.wait_rendered()
        card = app.transcript.card("q2")
        assert card is not None
        assert card.header_text.endswith("question: Which colour?")
        assert card.args_text == "options: Red · Blue (only these)"
        assert "allowText" not in card.args_text


async def test_an_aborted_call_keeps_the_partial_output_it_showed(conversation, docs) -> None:
    from coding_agent.tui import CodingAgentApp

    call = {"type": "toolCall", "id": "b1", "name": "bash", "arguments": {"command": "make"}}
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)):
        await app.wait_rendered()

        def running(doc: Any) -> None:
            doc["turn"] = {
                "inputs": [1],
                "message": docs.assistant_message(call),
                "tools": [{"callId": "b1", "name": "bash", "status": "running",
                           "output": "compiling a.c\ncompiling b.c"}],
            }  # fmt: skip

        conversation.change(running)
        await app.wait_rendered()
        card = app.transcript.card("b1")
        assert card is not None and "compiling b.c" in card.live_text

        def aborted(doc: Any) -> None:
            del doc["turn"]
            doc["entries"].append(docs.assistant_entry(2, docs.assistant_message(call)))
            doc["entries"].append(
                docs.tool_result_entry(3, "b1", "bash", "Tool call aborted.", is_error=True)
            )

        conversation.change(aborted)
        await app.wait_rendered()
        card = app.transcript.card("b1")
        assert card is not None
        assert card.result_text.startswith("Tool call aborted.")
        assert "Output before it stopped:\ncompiling a.c\ncompiling b.c" in card.result_text


async def test_folded_output_names_the_key_that_expands_it(conversation, docs) -> None:
    """Long output starts folded, showing none of its lines: its title says how to open it
    (the bound key, as Claude Code's ``ctrl+o to expand``), and says nothing of it once open."""
    long_output = "\n".join(f"line {i}" for i in range(40))
    short = {"type": "toolCall", "id": "s", "name": "read", "arguments": {"path": "b.txt"}}
    call = {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a.txt"}}
    conversation.change(
        lambda doc: doc["entries"].extend(
            [
                docs.assistant_entry(1, docs.assistant_message(short, call, stop="toolUse")),
                docs.tool_result_entry(2, "s", "read", "one\ntwo"),
                docs.tool_result_entry(3, "c", "read", long_output),
            ]
        )
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        card, shown = app.transcript.card("c"), app.transcript.card("s")
        assert card is not None and shown is not None
        box: Any = card.query_one(".tool-output-box")
        assert box.collapsed and str(box.title) == "Output · 40 line(s) · ctrl+o expands"
        assert str(shown.query_one(".tool-output-box").title) == "Output · 2 line(s)"  # type: ignore[attr-defined]
        await pilot.press("ctrl+o")
        await docs.until(pilot, lambda: str(box.title) == "Output · 40 line(s)")
        await pilot.press("ctrl+o")
        await docs.until(pilot, lambda: str(box.title) == "Output · 40 line(s) · ctrl+o expands")
