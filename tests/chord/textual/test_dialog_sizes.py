"""A dialog on a small screen keeps its options and its key line (driven with Pilot).

An approval dialog as the coding agent shows it (a body of several lines, four options, two of
them long, the key line with its hint) at 60x20, 40x12 and larger: the box stays on the screen,
the key line is whole inside it, the body keeps at least a row (and scrolls), every option can
be reached with ↓ and is on screen when highlighted, and at 60x20 and up all of them show at
once (the body gives up its rows first). What shows is read from the screen's own picture.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from textual.app import App
from textual.widget import Widget
from textual.widgets import OptionList

from chord.textual import Choice, ChoiceScreen
from chord.textual_dialogs import _DialogBody, _KeysLine  # pyright: ignore[reportPrivateUsage]
from tests.chord.textual.test_dialogs import EditorApp, armed_dialog, until

pytestmark = pytest.mark.anyio

BODY = "Overwrites the existing file (812 bytes now).\n\nnotes.md  (3 lines, 13 bytes)\n\n"
BODY += "# Notes\n\nnew\n"
CHOICES = [
    Choice("allow", "Allow once"),
    Choice("session", "Allow Write(./notes.md) in this session"),
    Choice("project", "Allow Write(./notes.md) in this project (.coding-agent/config.toml)"),
    Choice("deny", "Deny"),
]
HINT = "esc denies (the turn goes on without it)"
KEYS = "↑↓ or 1-4 select · enter answers · esc denies (the turn goes on without it)"


def screen_rows(app: App[Any]) -> list[str]:
    """The text of each row of the screen, as its screenshot draws it (each run of text at its
    column: the SVG leaves the blanks out)."""
    svg = app.export_screenshot()
    width, height = app.size
    rows = [[" "] * width for _ in range(height)]
    pattern = (
        r'<text[^>]* x="([\d.]+)"[^>]* textLength="([\d.]+)"[^>]*'
        r'clip-path="url\(#terminal-\w+-line-(\d+)\)">(.*?)</text>'
    )
    for x, length, row, raw in re.findall(pattern, svg):
        text = html.unescape(raw).replace("\xa0", " ")
        cell = float(length) / len(text)
        column = round(float(x) / cell)
        rows[int(row)][column : column + len(text)] = list(text)
    return ["".join(row) for row in rows]


@pytest.mark.parametrize("size", [(60, 20), (40, 12), (80, 24), (100, 30)])
async def test_a_dialog_keeps_its_options_and_key_line_on_a_small_screen(
    size: tuple[int, int],
) -> None:
    app = EditorApp()
    answers: list[str | None] = []
    async with app.run_test(size=size) as pilot:
        app.push_screen(ChoiceScreen("Allow write?", CHOICES, BODY, False, HINT), answers.append)
        screen = await armed_dialog(pilot)
        body, options = screen.query_one(_DialogBody), screen.query_one(OptionList)
        keys = screen.query_one(_KeysLine)
        box = keys.parent
        assert isinstance(box, Widget)

        def settled() -> bool:  # the final key line laid out, the rows shared out and applied
            fitted = (body.styles.max_height, options.styles.max_height)
            screen.fit_body()  # idempotent once the layout has settled
            rows = (body.styles.max_height, options.styles.max_height)
            return (
                str(keys.render()) == KEYS
                and rows == fitted
                and rows[0] is not None
                and rows[1] is not None
                and body.outer_size.height <= rows[0].value
                and options.outer_size.height <= rows[1].value
            )

        await until(pilot, settled, "the dialog's rows shared out")
        await pilot.pause()
        assert screen.region.contains_region(box.region), (box.region, screen.region)
        assert box.region.contains_region(keys.region), (keys.region, box.region)
        assert box.region.contains_region(options.region), (options.region, box.region)
        assert body.region.height >= 1
        rows = screen_rows(app)
        print("\n".join(rows))  # shown when the test fails
        left, right = keys.region.x, keys.region.right
        shown = " ".join(
            " ".join(r[left:right] for r in rows[keys.region.y : keys.region.bottom]).split()
        )
        assert shown == KEYS, rows
        if size >= (60, 20):  # the blank rows went first, then body rows: all options show
            assert options.max_scroll_y == 0
            assert body.region.height >= 3
            listed = "\n".join(rows[options.region.y : options.region.bottom])
            assert all(f"{n}. " in listed for n in range(1, 5)), rows
        for number in range(1, 5):  # each one reachable with ↓, and on screen when highlighted
            if number > 1:
                await pilot.press("down")
            await until(pilot, lambda n=number: options.highlighted == n - 1, f"option {number}")
            await pilot.pause()
            rows = screen_rows(app)
            listed = "\n".join(rows[options.region.y : options.region.bottom])
            assert f"{number}. " in listed, rows
        assert "4. Deny" in "\n".join(rows[options.region.y : options.region.bottom])
        await pilot.press("enter")
        await until(pilot, lambda: answers, "the answer")
    assert answers == ["deny"]
