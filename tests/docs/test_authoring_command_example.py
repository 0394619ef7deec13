"""docs/authoring-facets.md's "Add a slash command", run: its example's handler is called the
way the guide says a test calls it, and what the guide says ``/help`` and a refusal show is
what the command really shows."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from chord import BACKGROUND, Context
from chord.textual import ArgumentError, CommandError

pytestmark = pytest.mark.anyio

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "authoring-facets.md"


def _section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("### Add a slash command") :]
    following = re.search(r"^##? ", section[3:], flags=re.MULTILINE)  # the next section
    return section if following is None else section[: following.start() + 3]


def _example() -> dict[str, Any]:
    (block,) = re.findall(r"^```python\n(.*?)^```", _section(), flags=re.DOTALL | re.MULTILINE)
    contract = "from .contract import GreeterService\n"
    assert contract in block
    source = block.replace(contract, "GreeterService = None  # the package's contract\n")
    module = ModuleType("greeter_tui")  # a module of its own, as the package's tui.py is
    code = compile(source, f"{GUIDE.name}: Add a slash command", "exec", dont_inherit=True)
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.__dict__


class Greeter:
    async def greet(self, name: str, style: str, ctx: Context) -> str:
        text = f"Hello, {name}"
        return text.upper() if style == "loud" else text


async def test_the_guides_command_runs_as_the_guide_says() -> None:
    example = _example()
    (command,) = example["COMMANDS"]
    target = example["Greeting"](Greeter())
    greet = example["greet"]
    assert await greet(target, command.parse("Ada loud"), BACKGROUND) == "HELLO, ADA"
    assert await command.run(target, "Ada", BACKGROUND) == "Hello, Ada"
    section = _section()
    assert f"`{command.usage} — {command.help}`" in section  # what /help shows
    with pytest.raises(ArgumentError) as refused:
        command.parse("")
    assert f"`{refused.value}`" in section.replace("\n", " ")
    with pytest.raises(CommandError, match="name somebody"):
        await command.run(target, "nobody", BACKGROUND)
