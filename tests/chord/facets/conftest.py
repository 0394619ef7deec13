"""Shared helpers for the facet tests: a list that can be waited on (no polling sleeps)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest


class Recorder(list[Any]):
    """A list whose ``append`` wakes :meth:`wait_until`; tests wait on it instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = anyio.Event()

    def append(self, item: Any) -> None:
        super().append(item)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_until(self, predicate: Callable[[list[Any]], bool]) -> None:
        """Return once ``predicate(self)`` holds; fail after five seconds."""
        with anyio.fail_after(5):
            while not predicate(self):
                await self._changed.wait()

    async def wait_for_length(self, length: int) -> None:
        """Return once at least ``length`` items were recorded."""
        await self.wait_until(lambda items: len(items) >= length)


@pytest.fixture
def recorder() -> Callable[[], Recorder]:
    """A factory of :class:`Recorder` lists."""
    return Recorder
