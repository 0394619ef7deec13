"""Fixtures for owned-conversation tests: a resumed harness with a faux model and test kinds,
on memory and JSONL storage, plus an event-driven ``until``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tasks import ManualClock, TaskKind
from pico3.turn.models import Models

MODEL = {"provider": "faux", "modelId": "faux-1"}


@pytest.fixture(params=["memory", "jsonl"])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Storage]:
    """A function giving a storage object for *the same* place on every call (reopen)."""
    if request.param == "memory":
        shared = MemoryStorage()
        return lambda: shared
    return lambda: JsonlStorage(tmp_path / "session", fsync=False)


@pytest.fixture
def open_harness(storage_factory: Callable[[], Storage]) -> Callable[..., Any]:
    """``async with open_harness(script, kinds) as h``: entered, kinds registered, resumed."""

    @asynccontextmanager
    async def opener(
        script: Iterable[FauxStep] = (), kinds: Iterable[TaskKind] = ()
    ) -> AsyncIterator[Harness]:
        options = HarnessOptions(
            require_approval=False,
            clock=ManualClock(),
            services={"models": Models([FauxProvider(script)])},
        )
        harness = await Harness.open(storage_factory(), options, BACKGROUND)
        async with harness:
            for kind in kinds:
                harness.register_task_kind(kind)
            await harness.resume(BACKGROUND)
            yield harness

    return opener


async def _until(harness: Harness, check: Callable[[], Awaitable[Any]]) -> Any:
    """Re-evaluate ``check`` after every commit until it is truthy (gives up after 30 s)."""
    with anyio.fail_after(30):
        while True:
            changed = anyio.Event()
            remove = harness.kernel.add_commit_listener(lambda _b, e=changed: e.set())
            try:
                value = await check()
                if value:
                    return value
                await changed.wait()
            finally:
                remove()


@pytest.fixture
def until() -> Callable[..., Any]:
    return _until
