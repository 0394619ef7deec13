"""Shared pico3 fixtures: a storage factory over MemoryStorage, JsonlStorage(fsync=False) and
JsonlStorage(fsync=True) (every test that uses it runs on all three; with fsync the kernel commits
through the storage's group commit, ``commit_deferred``), a manual clock, collected reports and an entered harness.

Folders with needs of their own override these in their own conftest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness, HarnessOptions
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tasks import ManualClock

StorageFactory = Callable[[], Storage]


@pytest.fixture(params=["memory", "jsonl", "jsonl-fsync"])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    """A function giving a storage object for *the same* place on every call (reopen)."""
    if request.param == "memory":
        shared = MemoryStorage()
        return lambda: shared
    fsync = request.param == "jsonl-fsync"
    return lambda: JsonlStorage(tmp_path / "session", fsync=fsync)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def reports() -> list[BaseException]:
    """Errors the harness reported through ``on_report`` (task faults among them)."""
    return []


@pytest.fixture
def options(clock: ManualClock, reports: list[BaseException]) -> HarnessOptions:
    """The approval gate is off here (nobody approves these tests' tools); it is on by default
    and tested on its own in tests/pico3/extension/test_approval_gate.py."""
    return HarnessOptions(on_report=reports.append, clock=clock, require_approval=False)


@pytest.fixture
async def harness(
    storage_factory: StorageFactory, options: HarnessOptions
) -> AsyncIterator[Harness]:
    """An entered harness (not yet resumed: register kinds, then ``await h.resume(ctx)``)."""
    h = await Harness.open(storage_factory(), options, BACKGROUND)
    async with h:
        yield h
