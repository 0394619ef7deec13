"""Fixtures for the custom-kind tests: the seed indexer module on ``sys.path``, storages (memory
and JSONL), a manual clock and a session factory built on :class:`HarnessHandle`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tasks import ManualClock

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # `import seed_indexer` (also what the crash child does)


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
def repo(tmp_path: Path) -> Path:
    """A small tree: five files, one of them a log."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for name in ("a.py", "b.py", "src/c.py", "src/d.py", "z.log"):
        (root / name).write_text(f"# {name}\n")
    return root
