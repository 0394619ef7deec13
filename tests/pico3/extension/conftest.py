"""Fixtures for the extension surface: real kernels on memory and JSONL storage, and a tool slot.

The turn loop owns where a tool's slot lives (``sticky.turn.tools[i]``) and commits to it with
the tool task's authority. These tests stand in for it with :class:`ToolSlot`: a real core
commit on the conversation's sticky document, so memos, ``waitingOn`` and events go through the
kernel, the membrane, storage and the view exactly as they do under ``pi.tool``.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel.tx import Authority, Transaction
from pico3.kernel.view import Envelope
from pico3.storage import JsonlStorage, MemoryStorage, Storage

StorageFactory = Callable[[], Storage]


@pytest.fixture(params=["memory", "jsonl"])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    """A function giving a storage object for *the same* place each call (reopen)."""
    if request.param == "memory":
        shared = MemoryStorage()
        return lambda: shared
    return lambda: JsonlStorage(tmp_path / "session", fsync=False)


class ToolSlot:
    """Commit functions on ``sticky.turn.tools[index]`` of one conversation (core authority)."""

    def __init__(self, harness: Harness, conversation_id: int, index: int = 0) -> None:
        self.harness = harness
        self.conversation_id = conversation_id
        self.index = index
        self.commits = 0

    async def create(self, call_id: str, name: str, ctx: Context = BACKGROUND) -> None:
        """Write a pending slot for one call (what the generation closure does)."""

        def build(tx: Transaction, _ctx: Context) -> None:
            sticky = tx.document("sticky")
            if "turn" not in sticky:
                sticky["turn"] = {"tools": []}
            tools = sticky["turn"]["tools"]
            while len(tools) <= self.index:
                tools.append({})
            tools[self.index] = {"callId": call_id, "name": name, "args": {}, "status": "pending"}

        await self.harness.kernel.commit(
            build, ctx, conversation_id=self.conversation_id, authority=Authority.CORE
        )

    async def __call__(
        self, fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context
    ) -> Any:
        self.commits += 1

        def build(tx: Transaction, _ctx: Context) -> Any:
            return fn(tx, tx.document("sticky")["turn"]["tools"][self.index])

        return await self.harness.kernel.commit(
            build, ctx, conversation_id=self.conversation_id, authority=Authority.CORE
        )

    async def read(self, ctx: Context = BACKGROUND) -> dict[str, Any]:
        """A plain copy of the slot."""
        return await self(lambda _tx, slot: dict(slot.to_plain()), ctx)  # type: ignore[attr-defined]


class Recorder:
    """Collects envelopes of a watch."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []

    def __call__(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)

    def events(self) -> list[dict[str, Any]]:
        return [event for envelope in self.envelopes for event in envelope.events]


@pytest.fixture
def make_slot() -> type[ToolSlot]:
    """The :class:`ToolSlot` class (conftest modules are not importable under importlib mode)."""
    return ToolSlot


@pytest.fixture
def recorder() -> Recorder:
    """A fresh envelope recorder."""
    return Recorder()
