"""Fixtures for kernel tests: every storage-dependent test runs on memory and on JSONL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pico3.storage import JsonlStorage, MemoryStorage, Storage

StorageFactory = Callable[[], Storage]


@pytest.fixture(params=["memory", "jsonl"])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    """Returns a function giving a storage object for *the same* place each call (reopen)."""
    if request.param == "memory":
        shared = MemoryStorage()
        return lambda: shared
    return lambda: JsonlStorage(tmp_path / "session", fsync=False)
