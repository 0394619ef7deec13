"""The approval TUI facet in a real Textual app (Pilot), against the dialog contract.

The session side here is a scripted provider of ``pi.approval-dialog`` in its own facet host;
the presentation host reaches it through chord's loopback source, exactly as a TUI process
reaches the session worker. (The real session facet over a harness is in
``test_approval_session.py``.)
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord import textual_dialogs
from chord.facets import create_facet_host
from chord.textual import ARMING_SECONDS
from facets_approval.tui import PREVIEW_LINES, describe_call, dialog_body, tui_facet

pytestmark = pytest.mark.anyio

RULE = "Bash(rm -rf build/)"
"""The narrow rule the scripted request offers (the session computes it: ``suggest_rules``)."""


@pytest.mark.parametrize(
    ("keys", "decision"),
    [
        (["enter"], {"decision": "allow", "by": "tui"}),
        (["down", "enter"], {"decision": "allow", "rule": RULE, "scope": "session", "by": "tui"}),
        (
            ["down", "down", "enter"],
            {"decision": "allow", "rule": RULE, "scope": "user", "by": "tui"},
        ),
        (["down", "down", "down", "enter"], {"decision": "deny", "by": "tui"}),
        (["escape"], {"decision": "deny", "by": "tui"}),
        (["1", "enter"], {"decision": "allow", "by": "tui"}),
        (["2", "enter"], {"decision": "allow", "rule": RULE, "scope": "session", "by": "tui"}),
        (["4", "enter"], {"decision": "deny", "by": "tui"}),
    ],
    ids=["allow", "session-rule", "user-rule", "deny", "escape-denies", "1", "2", "4"],
)
async def test_the_modal_shows_the_call_and_sends_the_chosen_decision(
    kit: Any, keys: list[str], decision: dict[str, Any]
) -> None:
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        request = kit.bash_request(command="rm -rf build/")
        request |= {"rule": RULE, "scopes": ["session", "user"]}
        dialog, _close = scripted.open("1:call-1", request)
        screen = await app.shown_dialog(pilot)
        assert kit.title(screen) == "Allow bash?"
        assert "$ rm -rf build/" in kit.body(screen)
        assert kit.options(screen) == [
            "1. Allow once",
            f"2. Allow {RULE} in this session",
            f"3. Allow {RULE} everywhere (your config.toml)",
            "4. Deny",
        ]
        hint = str(screen.query_one(".keys").render())
        assert "enter answers" in hint and "esc denies" in hint  # what Esc does, said on it
        await pilot.press(*keys)
        with anyio.fail_after(10):
            await dialog.answered.wait()
        assert dialog.answers == [decision]
        await app.until(lambda: app.dialog() is None)  # the modal slot was given back


async def test_a_compound_command_s_standing_choice_names_and_keeps_every_rule(kit: Any) -> None:
    rules = ["Bash(cd:*)", "Bash(npm test:*)"]
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        request = kit.bash_request(command="cd src && npm test")
        request |= {"rules": rules, "scopes": ["session"]}
        dialog, _close = scripted.open("1:call-1", request)
        screen = await app.shown_dialog(pilot)
        assert kit.options(screen) == [
            "1. Allow once",
            "2. Allow Bash(cd:*) and Bash(npm test:*) in this session",
            "3. Deny",
        ]
        await pilot.press("2", "enter")
        with anyio.fail_after(10):
            await dialog.answered.wait()
        assert dialog.answers == [
            {"decision": "allow", "rules": rules, "scope": "session", "by": "tui"}
        ]


@pytest.mark.parametrize("letter", ["y", "a", "n"])
async def test_a_letter_answers_nothing(
    kit: Any, letter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old single-key shortcuts: "a" of a word chose "Always allow bash" (issue 36 item 2).
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        dialog, _close = scripted.open("1:call-1", kit.bash_request())
        screen = await app.shown_dialog(pilot)
        # the arming time is an hour while the key is checked (a loaded machine cannot let it
        # run out before the check), then the stated time again
        monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", 3600.0)
        await pilot.press(letter)
        assert dialog.answers == [] and app.dialog() is screen and not screen.answered
        assert not screen.armed  # a text key arms the dialog again
        monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", ARMING_SECONDS)
        await pilot.press(letter)  # (restarts the stated time)
        screen = await app.shown_dialog(pilot)
        await pilot.press("2", "enter")  # Allow once, Deny: this request offers no rule
        with anyio.fail_after(10):
            await dialog.answered.wait()
        assert dialog.answers == [{"decision": "deny", "by": "tui"}]


async def test_closing_the_instance_dismisses_the_modal_without_a_decision(kit: Any) -> None:
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        dialog, close = scripted.open("1:call-1", kit.bash_request())
        await app.shown_dialog(pilot)
        close()  # e.g. another presentation's decision was recorded, or the call was aborted
        await app.until(lambda: app.dialog() is None)
        assert dialog.answers == []
        notice = "Already answered in another window (or no longer needed): Allow bash?"
        with anyio.fail_after(10):  # the toast is a message the app handles next
            while not app._notifications:
                await pilot.pause(0.01)
        assert [n.message for n in app._notifications] == [notice]
        # The slot is free again: the next dialog shows and can be answered.
        second, _ = scripted.open("1:call-2", kit.bash_request("call-2", "make"))
        screen = await app.shown_dialog(pilot)
        assert "$ make" in kit.body(screen)
        await pilot.press("enter")
        with anyio.fail_after(10):
            await second.answered.wait()
        assert second.answers == [{"decision": "allow", "by": "tui"}]


async def test_two_open_dialogs_are_shown_one_after_the_other(kit: Any) -> None:
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        first, _ = scripted.open("1:a", kit.bash_request("a", "first"))
        second, _ = scripted.open("1:b", kit.bash_request("b", "second"))
        screen = await app.shown_dialog(pilot)
        assert len(app.screen_stack) == 2  # the default screen and one dialog
        shown_first = "$ first" in kit.body(screen)
        await pilot.press("enter")  # allow the one on screen
        await app.until(lambda: app.dialog() not in (None, screen))  # then the other one shows
        await app.shown_dialog(pilot)
        await pilot.press("down", "enter")  # deny the other one (Allow once, Deny: no rule offered)
        with anyio.fail_after(10):
            await first.answered.wait()
            await second.answered.wait()
        allowed, denied = (first, second) if shown_first else (second, first)
        assert allowed.answers == [{"decision": "allow", "by": "tui"}]
        assert denied.answers == [{"decision": "deny", "by": "tui"}]


async def test_a_presentation_that_connects_late_sees_and_answers_an_open_dialog(
    kit: Any,
) -> None:
    # docs/design/chord.md#observe: late-joiner hydration of an open dialog instance
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with (
        create_facet_host([scripted.facet]) as session,
        anyio.create_task_group() as group,
    ):
        dialog, _ = scripted.open("1:call-1", kit.bash_request(command="git push"))
        async with (
            app.run_test() as pilot,
            kit.presentation(session, [tui_facet], app.tui, group),
        ):
            screen = await app.shown_dialog(pilot)
            assert "$ git push" in kit.body(screen)
            await pilot.press("enter")
            with anyio.fail_after(10):
                await dialog.answered.wait()
        assert dialog.answers == [{"decision": "allow", "by": "tui"}]
        group.cancel_scope.cancel()


def test_the_dialog_body_reads_each_coding_tool_in_its_own_terms() -> None:
    assert describe_call("bash", {"command": "make test", "timeout": 30}) == (
        "$ make test\ntimeout: 30"
    )
    written = describe_call("write", {"path": "a.txt", "content": "one\ntwo\n"})
    assert written == "a.txt  (2 line(s), 8 bytes)\n\none\ntwo"
    edited = describe_call(
        "edit",
        {"path": "m.py", "edits": [{"oldText": "x = 1", "newText": "x = 2\ny = 3"}]},
    )
    assert edited == "m.py\n\n@@ replacement 1 of 1 @@\n-x = 1\n+x = 2\n+y = 3"
    long = describe_call("write", {"path": "big", "content": "\n".join(map(str, range(100)))})
    assert long.splitlines()[-1] == f"… {100 - PREVIEW_LINES} more line(s)"
    # anything else, or an unexpected shape, is the JSON itself: nothing is hidden
    assert describe_call("deploy", {"to": "prod"}) == '{\n  "to": "prod"\n}'
    assert describe_call("edit", {"path": "m.py", "edits": [{"oldText": 1}]}).startswith("{")
    assert describe_call("bash", ["not", "an", "object"]).startswith("[")


async def test_a_write_over_an_existing_file_says_so_and_diffs_are_coloured(kit: Any) -> None:
    request = {
        "conversationId": 1,
        "callId": "call-1",
        "taskId": 7,
        "name": "write",
        "args": {"path": "notes.md", "content": "new\n"},
        "overwrites": 1234,
    }
    body = dialog_body(request)
    assert body.plain.startswith("Overwrites the existing file (1,234 bytes now).")
    edit = dialog_body(
        {
            **request,
            "name": "edit",
            "args": {"path": "a.py", "edits": [{"oldText": "x = 1", "newText": "x = 2"}]},
        }
    )
    styles = {edit.plain[span.start : span.end]: str(span.style) for span in edit.spans}
    assert styles["-x = 1"] == "red" and styles["+x = 2"] == "green"
    assert "Overwrites" not in edit.plain
    del request["overwrites"]
    assert "Overwrites" not in dialog_body(request).plain
