"""Fixtures shared by the app's tests in every folder: a small real disk that can be filled up."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted after the test (needs root: skipped elsewhere, failing in CI)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        reason = "needs root and mount(8) for a small tmpfs"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI runs as root")
        pytest.skip(reason)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(folder)],
        check=True,
        capture_output=True,
    )
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def _fill(disk: Path, leave: int = 64 * 1024) -> Path:
    filler = disk / "filler"
    chunk = b"\0" * 4096
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@pytest.fixture
def fill_disk() -> Callable[[Path], Path]:
    """``fill_disk(disk)`` fills ``disk`` up, then frees 64 KiB (small writes such as
    session.json fit) and returns the filler file (delete it to make room again)."""
    return _fill
