"""The tmux helpers' own checks (no tmux needed): what counts as a whole dialog box, and that
:meth:`Terminal.wait_dialog` never takes a half-drawn frame (the new dialog's title above the
previous dialog's armed key line) for an armed dialog."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.tui.process.tmux_support import ARMING, Terminal, dialog_boxes, key_line

WIDTH = 40


def box(*rows: str, left: str = "") -> list[str]:
    """A chord dialog box as tmux shows it (thick border, padding), ``left`` before it."""
    inner = WIDTH - 2
    pad = " " * len(left) if left else ""
    lines = [pad + "█" + "▀" * inner + "█", pad + "█" + " " * inner + "█"]
    for row in rows:
        lines.append(pad + "█" + ("  " + row).ljust(inner) + "█")
    lines += [pad + "█" + " " * inner + "█", pad + "█" + "▄" * inner + "█"]
    if left:
        lines[2] = left + lines[2][len(left) :]
    return lines


def dialog(title: str, body: str, keys: str) -> list[str]:
    return box(title, "", body, "", "1. Allow once", "2. Deny", "", keys)


ARMED = "↑↓ or 1-2 select · enter answers"


def test_a_whole_box_gives_its_rows_and_key_line() -> None:
    [rows] = dialog_boxes("\n".join(["", *dialog("Allow bash?", "$ echo one", ARMED), ""]))
    assert rows[1] == "Allow bash?" and key_line(rows) == ARMED


def test_a_box_without_its_bottom_or_a_side_is_not_one() -> None:
    lines = dialog("Allow bash?", "$ echo one", ARMED)
    assert dialog_boxes("\n".join(lines[:-1])) == []  # the bottom not drawn yet
    broken = [*lines[:4], "  half a row", *lines[5:]]
    assert dialog_boxes("\n".join(broken)) == []


def test_wide_characters_before_a_box_keep_its_columns() -> None:
    # "📎" takes two cells (one character): the box's sides are found by cell, not by index.
    lines = box("Allow bash?", "", ARMED, left="📎 x")
    [rows] = dialog_boxes("\n".join(line.replace("📎 x", "📎x", 1) for line in lines))
    assert key_line(rows) == ARMED


class CannedTerminal(Terminal):
    """A :class:`Terminal` whose pane shows ``shown`` and whose program wrote what a test
    appends to its log: no tmux."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder / "tmux.sock", {})
        self.logs.mkdir()
        self.log("one").touch()
        self.shown = ""

    def screen(self, window: str) -> str:
        return self.shown

    def write(self, text: str) -> None:
        with self.log("one").open("a") as log:
            log.write(f"\x1b[3;5H\x1b[1m{text}\x1b[0m")


def test_a_half_drawn_frame_over_the_previous_dialog_is_not_taken_for_it_armed(
    tmp_path: Path,
) -> None:
    term = CannedTerminal(tmp_path)
    first = dialog("Allow bash?", "$ echo one", ARMED)
    term.write("Allow bash? $ echo one " + ARMED)
    term.shown = "\n".join(first)
    assert "echo one" in term.wait_dialog("one", "Allow bash?", body="echo one", timeout=5)
    term._marks["one"] = term._size("one")  # what press() does: the answer's key
    second = dialog("Allow bash?", "$ echo two", ARMING)
    # The new frame half drawn: its top (title, body) over the old dialog's armed bottom. As
    # a box it looks whole and armed...
    term.shown = "\n".join(second[:5] + first[5:])
    assert any(key_line(rows) == ARMED for rows in dialog_boxes(term.shown))
    term.write("Allow bash? $ echo two")
    # ...but nothing written since the key proves it: no arming line, no key line after the title.
    with pytest.raises(AssertionError, match="to appear"):
        term.wait_dialog("one", "Allow bash?", body="echo two", timeout=0.5)
    term.write(ARMING)  # the rest of the frame arrives: the new dialog arms
    term.shown = "\n".join(second)
    with pytest.raises(AssertionError, match="armed in a whole box"):
        term.wait_dialog("one", "Allow bash?", body="echo two", timeout=0.5)
    term.write(ARMED)
    term.shown = "\n".join(dialog("Allow bash?", "$ echo two", ARMED))
    assert "echo two" in term.wait_dialog("one", "Allow bash?", body="echo two", timeout=5)
