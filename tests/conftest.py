"""Shared test configuration: anyio runs on asyncio unless a module opts into trio too."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
