"""A new user's first day, through the real binary in tmux (issue 38).

Each test reads the screen as a person would (:class:`~tests.app.tui.process.test_tmux.Terminal`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.tui.process.test_tmux import BINARY, Terminal, terminal  # noqa: F401 - the fixture


@pytest.mark.parametrize("size", [(160, 45), (100, 30)])
def test_f1_help_scrolls_to_its_last_line_with_the_keys_its_footer_names(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    size: tuple[int, int],
) -> None:
    terminal.start("one", project, str(BINARY))
    terminal.tmux("resize-window", "-t", "main:one", "-x", str(size[0]), "-y", str(size[1]))
    terminal.wait_text("one", "faux/faux-1")
    terminal.press("one", "F1")
    first = terminal.wait_text("one", "↑↓ pgup pgdn scroll")
    last = "tab completes paths"  # the key list's last fixed line, past the screen's bottom
    assert last not in first, "the help is longer than the screen (else this tests nothing)"
    terminal.press("one", "PageDown", "PageDown", "PageDown", "PageDown")  # one burst: all count
    terminal.wait_text("one", last)
    terminal.press("one", "Home")
    terminal.wait(one := "one", lambda text: "/help" in text and last not in text, "the top")
    terminal.press(one, *["Down"] * 80)
    terminal.wait_text("one", last)
    terminal.press("one", "Escape")
    terminal.wait(one, lambda text: "↑↓ pgup pgdn scroll" not in text, "the help closed")
