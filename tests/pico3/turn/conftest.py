"""Fixtures for the turn loop: a running harness on memory or JSONL storage with a faux model.

``session(script, storage=...)`` opens a harness, sets the conversation's model to the faux
provider, resumes dispatch and yields a :class:`Session` with the root conversation, the
provider, the clock and every envelope the root's watch received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from chord.delta import apply_immutable
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.kernel.view import Envelope
from pico3.models.faux import FauxProvider, FauxStep
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tasks.clock import ManualClock
from pico3.turn.models import Models

MODEL = {"provider": "faux", "modelId": "faux-1"}


@dataclass
class Session:
    harness: Harness
    root: ConversationHandle
    faux: Any
    clock: ManualClock
    envelopes: list[Envelope] = field(default_factory=list[Envelope])
    reports: list[BaseException] = field(default_factory=list[BaseException])
    view: Any = None
    on_envelope: Callable[[], Any] | None = None
    _arrived: anyio.Event = field(default_factory=anyio.Event)
    views: list[Any] = field(default_factory=list[Any])
    """The replica after each envelope (folded with chord.delta, like a client would)."""

    def receive(self, envelope: Envelope) -> None:
        self.view = apply_immutable(self.view, envelope.ops)
        self.envelopes.append(envelope)
        self.views.append(self.view)
        if self.on_envelope is not None:
            self.on_envelope()
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait_view(self, predicate: Callable[[Any], bool]) -> Any:
        """Wait (on envelope arrival) until the replica satisfies ``predicate``."""
        while not predicate(self.view):
            await self._arrived.wait()
        return self.view

    async def wait_event(self, event_type: str, count: int = 1) -> dict[str, Any]:
        """Wait (on envelope arrival, never on time) until ``count`` events of a type came."""
        while len(self.events(event_type)) < count:
            await self._arrived.wait()
        return self.events(event_type)[count - 1]

    def view_after(self, event_type: str) -> Any:
        """The replica right after the first envelope carrying ``event_type``."""
        for envelope, view in zip(self.envelopes, self.views, strict=True):
            if any(event["type"] == event_type for event in envelope.events):
                return view
        raise AssertionError(f"no envelope with {event_type}")

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        out = [event for envelope in self.envelopes for event in envelope.events]
        return [e for e in out if kind is None or e["type"] == kind]

    async def idle(self) -> None:
        await self.root.wait_for_idle(BACKGROUND)

    async def entries(self) -> list[Any]:
        return list(reversed(await self.root.entries(BACKGROUND, limit=1000)))


Opener = Callable[..., Any]


@pytest.fixture(params=["memory", "jsonl"])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Storage]:
    if request.param == "memory":
        return MemoryStorage
    return lambda: JsonlStorage(tmp_path / "session", fsync=False)


@pytest.fixture
def open_session(storage_factory: Callable[[], Storage]) -> Callable[..., Any]:
    @asynccontextmanager
    async def opener(
        script: Iterable[FauxStep] = (),
        *,
        storage: Storage | None = None,
        model: bool = True,
        setup: Callable[[Harness], Any] | None = None,
        config: dict[str, Any] | None = None,
        provider: Any = None,
    ) -> AsyncIterator[Session]:
        faux = provider if provider is not None else FauxProvider(script)
        clock = ManualClock(1_000_000)
        reports: list[BaseException] = []
        options = HarnessOptions(
            require_approval=False,
            on_report=reports.append,
            clock=clock,
            services={"models": Models([faux])},
        )
        harness = await Harness.open(storage or storage_factory(), options, BACKGROUND)
        async with harness:
            if setup is not None:
                setup(harness)
            root = await harness.root(BACKGROUND)
            patch = dict(config or {})
            if model:
                patch["model"] = MODEL
            if patch:
                await root.set_config(patch, BACKGROUND)
            session = Session(harness, root, faux, clock, reports=reports)
            watch = await root.watch(BACKGROUND)
            session.view = watch.view
            watch.start(session.receive)
            await harness.resume(BACKGROUND)
            yield session

    return opener
