"""A command's and a skill's ``argument-hint`` in the ``/`` palette and after ``/NAME `` in the
editor, as Claude Code shows it: after the name, dimmed, and always as the characters written
(``[`` and ``]`` are normal in hints; they are never read as Textual markup).

Real files: a Claude Code custom command in ``~/.claude/commands/`` and skills in the user's
skills folder, found by the real discovery and registered by the prompt commands' own
:func:`~coding_agent.tui.commands.prompts.refresh`; the screen is read from the widgets'
rendered lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from textual.widget import Widget

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.commands.prompts import PromptsTarget, refresh

pytestmark = pytest.mark.anyio

HOSTILE = "[@click=app.quit]x[/]"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private home and config folder holding ``/review-pr`` (a Claude Code command), the
    skills ``triage`` (the same hint, unquoted: not YAML, as Claude Code's docs write it) and
    ``trap`` (a hint that is Textual markup), and ``plain`` (no hint)."""
    home, config = tmp_path / "home", tmp_path / "config"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    files = {
        home / ".claude/commands/review-pr.md": (
            "---\nargument-hint: [pr-number] [priority]\ndescription: Review a pull request\n"
            "---\nReview PR #$1 with priority $2.\n"
        ),
        config / "coding-agent/skills/triage/SKILL.md": (
            "---\nname: triage\ndescription: Triage an issue\n"
            "argument-hint: [pr-number] [priority]\n---\nTriage $ARGUMENTS.\n"
        ),
        config / "coding-agent/skills/trap/SKILL.md": (
            f'---\nname: trap\ndescription: Looks like markup\nargument-hint: "{HOSTILE}"\n'
            "---\nNothing.\n"
        ),
        config / "coding-agent/skills/plain/SKILL.md": (
            "---\nname: plain\ndescription: Takes nothing in particular\n---\nPlain.\n"
        ),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def _register(app: CodingAgentApp, conversation: Any, folder: Path) -> PromptsTarget:
    """The skill and template commands of ``folder``, registered as the TUI's facet does (the
    conversation is not used until a command runs)."""
    target = PromptsTarget(cast(Any, conversation), app.tui, None, folder)
    refresh(target)
    return target


def _lines(widget: Widget) -> list[str]:
    """What ``widget`` shows, one string per row of the screen it covers."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


def _dim(widget: Widget, text: str) -> bool | None:
    """Whether ``widget`` draws the start of ``text`` dimmed (``None``: it is not shown)."""
    for y in range(widget.size.height):
        for segment in widget.render_line(y):
            if segment.text.lstrip().startswith(text) and segment.style is not None:
                return bool(segment.style.dim)
    return None


def _row(app: CodingAgentApp, label: str) -> str:
    """The palette's rendered row that starts with ``label``, or ``""``."""
    return next((line for line in _lines(app.editor.palette) if line.startswith(label)), "")


async def test_the_palette_shows_a_commands_and_a_skills_hint_after_the_name_dimmed(
    conversation, docs, project: Path
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(110, 40)) as pilot:
        await app.wait_rendered()
        _register(app, conversation, project)
        await pilot.press(*"/review")
        await docs.until(pilot, lambda: _row(app, "/review-pr"))
        assert _row(app, "/review-pr") == (
            "/review-pr [pr-number] [priority]  Review a pull request"
        )
        (item,) = [s for s in app.editor.palette.suggestions if s.label == "/review-pr"]
        assert (item.hint, item.description) == ("[pr-number] [priority]", "Review a pull request")
        assert (_dim(app.editor.palette, "/review-pr"), _dim(app.editor.palette, "[pr")) == (
            False,
            True,
        )
        await pilot.press(*["backspace"] * 6, *"triage")
        await docs.until(pilot, lambda: _row(app, "/triage"))
        assert _row(app, "/triage") == "/triage [pr-number] [priority]  Triage an issue"
        await pilot.press(*["backspace"] * 6, *"plain")
        await docs.until(pilot, lambda: _row(app, "/plain"))
        assert _row(app, "/plain") == "/plain  Takes nothing in particular"  # no hint, no gap


async def test_a_hint_that_looks_like_markup_shows_as_written_and_does_nothing(
    conversation, docs, project: Path
) -> None:
    """``[@click=app.quit]x[/]`` read as markup would show ``x`` and quit the app when clicked:
    it shows whole, in the palette and in the editor, and a click on it only picks the row."""
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(110, 40)) as pilot:
        await app.wait_rendered()
        _register(app, conversation, project)
        await pilot.press(*"/trap")
        await docs.until(pilot, lambda: _row(app, "/trap"))
        assert _row(app, "/trap") == f"/trap {HOSTILE}  Looks like markup"
        palette = app.editor.palette
        row = next(y for y, line in enumerate(_lines(palette)) if line.startswith("/trap"))
        await pilot.click(palette, offset=(len("/trap ") + 3, row))  # on the hint itself
        await docs.until(pilot, lambda: app.editor.text == "/trap ")
        assert app.is_running and app.return_code is None
        await docs.until(pilot, lambda: _lines(app.editor)[0] == f"/trap {HOSTILE}")


async def test_after_the_name_and_a_space_the_editor_shows_the_hint_until_a_key_is_typed(
    conversation, docs, project: Path
) -> None:
    """Claude Code's ghost text: ``/review-pr `` shows its arguments after the cursor; they are
    not text (Right does not write them, Enter would send ``/review-pr`` alone) and the first
    key typed replaces them. A skill's shows the same way, after Tab completed its name."""
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(110, 40)) as pilot:
        await app.wait_rendered()
        _register(app, conversation, project)
        editor = app.editor
        await pilot.press(*"/review-pr ")
        await docs.until(pilot, lambda: _lines(editor)[0] == "/review-pr [pr-number] [priority]")
        assert editor.text == "/review-pr " and editor.argument_hint == "[pr-number] [priority]"
        await pilot.press("right")
        assert editor.text == "/review-pr "  # Right never writes the hint
        assert _lines(editor)[0] == "/review-pr [pr-number] [priority]"
        await pilot.press("left")  # the cursor inside the text: no hint in the way
        await docs.until(pilot, lambda: _lines(editor)[0] == "/review-pr")
        await pilot.press("end", "4")
        await docs.until(pilot, lambda: _lines(editor)[0] == "/review-pr 4")
        assert editor.suggestion == ""
        await pilot.press(*["backspace"] * len("/review-pr 4"), *"/tria", "tab")
        await docs.until(pilot, lambda: _lines(editor)[0] == "/triage [pr-number] [priority]")
        assert editor.text == "/triage "
        await pilot.press(*["backspace"] * len("/triage "), *"/plain ")
        await docs.until(pilot, lambda: editor.text == "/plain ")
        assert _lines(editor)[0] == "/plain" and editor.argument_hint == ""
