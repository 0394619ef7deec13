"""Fixtures for job and process tests: sessions with ``pi.job`` and a real process host
(memory and JSONL storage), an event-driven ``until``, and FIFO *gates*.

A gate is a FIFO a process blocks on until the test opens it. Opening a FIFO for writing blocks until a reader has it open, so ``await gate.opened()`` is an
event ("the process reached the gate"), and closing our end releases the process (its read
returns end-of-file). No sleeps.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3 import jobs
from pico3.handle import HarnessHandle
from pico3.harness import HarnessOptions
from pico3.process_host import LocalProcessHost
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.storage.records import TaskPatchWrite
from pico3.tasks import ManualClock


class Gate:
    """A FIFO a process reads from: ``opened()`` waits for the reader, ``release()`` lets it go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._fd: int | None = None

    @property
    def reader(self) -> str:
        """Python source that blocks until the gate is released."""
        return f"open({str(self.path)!r}).read()"

    async def opened(self) -> None:
        """Wait until a process has the gate open for reading."""
        try:
            with anyio.fail_after(30):
                self._fd = await anyio.to_thread.run_sync(
                    os.open, str(self.path), os.O_WRONLY, abandon_on_cancel=True
                )
        except TimeoutError:
            # Unblock the abandoned thread by becoming a reader ourselves.
            os.close(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK))
            raise

    async def release(self) -> None:
        """Let the reader go (waiting for it first if needed)."""
        if self._fd is None:
            await self.opened()
        assert self._fd is not None
        os.close(self._fd)
        self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@pytest.fixture
def gates(tmp_path: Path) -> Iterator[dict[str, Gate]]:
    """``gates["name"]`` creates (once) and returns a gate under ``tmp_path``."""
    made: dict[str, Gate] = {}

    class _Gates(dict[str, Gate]):
        def __missing__(self, name: str) -> Gate:
            gate = made[name] = Gate(tmp_path / f"gate-{name}")
            self[name] = gate
            return gate

    yield _Gates()
    for gate in made.values():
        gate.close()


# -- harness fixtures: a session with pi.job and a real process host --------------------------


@pytest.fixture(params=["memory", "jsonl"])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Storage]:
    """A function giving a storage object for *the same* place on every call (reopen)."""
    if request.param == "memory":
        shared = MemoryStorage()
        return lambda: shared
    return lambda: JsonlStorage(tmp_path / "session", fsync=False)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def reports() -> list[BaseException]:
    return []


@pytest.fixture
def host(tmp_path: Path) -> Iterator[LocalProcessHost]:
    with LocalProcessHost(tmp_path / "processes") as made:
        yield made


@asynccontextmanager
async def _open_session(
    storage_factory: Callable[[], Storage],
    clock: ManualClock,
    reports: list[BaseException],
    host: Any,
) -> AsyncIterator[HarnessHandle]:
    """An open, resumed session with ``pi.job`` registered and ``host`` (may be None) as its
    process host."""
    services = {} if host is None else {"process_host": host}
    options = HarnessOptions(on_report=reports.append, clock=clock, services=services)
    async with HarnessHandle(storage_factory, options) as made:
        made.add_registration(jobs.install)
        await made.open(BACKGROUND)
        yield made


@pytest.fixture
async def handle(
    storage_factory: Callable[[], Storage],
    clock: ManualClock,
    reports: list[BaseException],
    host: LocalProcessHost,
) -> AsyncIterator[HarnessHandle]:
    async with _open_session(storage_factory, clock, reports, host) as made:
        yield made


async def _until(handle: HarnessHandle, check: Callable[[], Awaitable[Any]]) -> Any:
    """Re-evaluate ``check`` after every commit until it returns something truthy (events, no
    polling); gives up after 30 s so a broken test fails instead of hanging."""
    with anyio.fail_after(30):
        while True:
            changed = anyio.Event()
            remove = handle.harness.kernel.add_commit_listener(lambda _b, e=changed: e.set())
            try:
                value = await check()
                if value:
                    return value
                await changed.wait()
            finally:
                remove()


def _record_checkpoints(handle: HarnessHandle, log: list[Any]) -> None:
    """Append ``("checkpoint", task_id, phase)`` to ``log`` for every committed checkpoint."""

    def listener(batch: Any) -> None:
        for write in batch.writes:
            if isinstance(write, TaskPatchWrite) and isinstance(write.patch.checkpoint, dict):
                log.append(("checkpoint", write.patch.id, write.patch.checkpoint["phase"]))

    handle.harness.kernel.add_commit_listener(listener)


@pytest.fixture
def open_session() -> Callable[..., Any]:
    """``async with open_session(storage_factory, clock, reports, host) as handle``."""
    return _open_session


@pytest.fixture
def until() -> Callable[..., Any]:
    """``await until(handle, check)``: wait (on commits) until ``await check()`` is truthy."""
    return _until


@pytest.fixture
def record_checkpoints() -> Callable[..., Any]:
    """``record_checkpoints(handle, log)``: log every committed checkpoint phase."""
    return _record_checkpoints
