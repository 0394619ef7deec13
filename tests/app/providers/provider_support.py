"""What the provider adapter tests share: a tool, a tiny PNG, the installed binary, a recording
``sleep`` and the collection of a provider's stream (importable like ``stub_server``: see
``conftest.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from chord.context import BACKGROUND
from pico3.models import ModelProvider, Request, StreamEvent, Tool

PNG = "iVBORw0KGgo="
"""Base64 of a PNG's first bytes (the adapters pass image data through, never decode it)."""

BINARY = Path(sys.executable).with_name("coding-agent")
"""The real ``coding-agent`` binary of this environment."""

READ = Tool(
    name="read",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


class Sleeps:
    """A provider's ``sleep``: records each back-off instead of waiting it out."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def collect(provider: ModelProvider, request: Request) -> list[StreamEvent]:
    """Every event of ``provider``'s stream for ``request``; the provider is closed after."""
    return (await collect_each(provider, request))[0]


async def collect_each(provider: ModelProvider, *requests: Request) -> list[list[StreamEvent]]:
    """The events of each request in turn on one ``provider``, closed after (every SDK adapter
    has ``aclose``; the :class:`~pico3.models.ModelProvider` protocol does not ask for it)."""
    try:
        return [[event async for event in provider.stream(r, BACKGROUND)] for r in requests]
    finally:
        await provider.aclose()  # pyright: ignore[reportAttributeAccessIssue]


def ask(model: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``coding-agent -p hi --model <model>`` in ``cwd`` with ``env`` (no stdin)."""
    return subprocess.run(
        [str(BINARY), "-p", "hi", "--model", model],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
