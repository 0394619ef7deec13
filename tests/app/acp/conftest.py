"""Makes :mod:`acp_support` importable from the ACP tests (importlib import mode); the ACP
tests' fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the ACP SDK runs on asyncio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("remember the milk\n")
    return folder
