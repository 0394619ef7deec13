"""The documentation screenshots script renders the real app (docs/screenshots/).

The script is not a package module, so it is loaded from its path. One screen at a time
is rendered into ``tmp_path`` and its SVG is checked for what the screen must show.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import anyio
import pytest

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).resolve().parents[3] / "docs" / "screenshots" / "make_screenshots.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _svg_text(svg: str) -> str:
    # Rich's SVG export writes spaces as &#160; and escapes markup characters.
    return svg.replace("&#160;", " ").replace("&quot;", '"').replace("&#x27;", "'")


async def test_the_approval_screenshot_shows_the_dialog_over_the_conversation(
    tmp_path: Path,
) -> None:
    script = _load_script()
    path = await script.take_screenshot("approval", tmp_path)
    assert path == tmp_path / "approval.svg"
    svg = await anyio.Path(path).read_text(encoding="utf-8")
    assert svg.startswith("<svg")
    text = _svg_text(svg)
    assert "Allow edit?" in text
    assert "Allow once" in text and "Allow Edit(./src/greeter.py) in this session" in text
    assert "Deny" in text
    assert "@@ replacement 1 of 1 @@" in text  # the call, as the approval facet reads an edit
    assert '+return "hello, " + name' in text  # the edit card, dimmed behind the dialog
    assert "anthropic/claude-sonnet-4-5" in text  # the footer


async def test_the_conversation_screenshot_shows_prompt_tools_answer_and_footer(
    tmp_path: Path,
) -> None:
    script = _load_script()
    path = await script.take_screenshot("conversation", tmp_path)
    text = _svg_text(await anyio.Path(path).read_text(encoding="utf-8"))
    assert script.PROMPT in text
    assert '+ 5     return "hello, " + name' in text  # the edit's diff
    assert "3 passed in 0.04s" in text  # the bash output
    assert "hello" in text and "Done." in text  # the Markdown answer
    assert "$0.016" in text and "ctx 2%" in text  # the footer's totals


def test_an_unknown_screen_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _load_script()
    with pytest.raises(KeyError, match="unknown screenshot 'nope'"):
        anyio.run(script.take_screenshot, "nope", tmp_path)
    assert script.main(["conversation", "nope"]) == 2  # checked before anything is rendered
    assert "unknown screenshot(s): nope" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
