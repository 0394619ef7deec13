"""pico3.files: the one atomic write, fsyncing the file and its folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pico3 import fsync_dir, write_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_write_atomic_replaces_the_content_privately(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_atomic(target, '{"a": 1}')
    assert target.read_text() == '{"a": 1}'
    assert _mode(target) == 0o600
    write_atomic(target, b"\x00binary")
    assert target.read_bytes() == b"\x00binary"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary left


def test_mode_none_keeps_the_replaced_files_bits(tmp_path: Path) -> None:
    target = tmp_path / "script.sh"
    target.write_text("old")
    target.chmod(0o751)
    write_atomic(target, "new", mode=None)
    assert target.read_text() == "new"
    assert _mode(target) == 0o751


def test_a_failed_write_keeps_the_old_content_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # a folder: the rename onto it fails
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        write_atomic(target, "new")
    assert (target / "inside").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_the_file_and_its_folder_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    target = tmp_path / "meta.json"
    write_atomic(target, "{}")
    assert len(synced) == 2
    assert Path(synced[0]).parent == tmp_path and synced[0].endswith(".tmp")  # before the rename
    assert synced[1] == str(tmp_path)  # the rename itself
    synced.clear()
    write_atomic(target, "{}", fsync=False)
    assert synced == []
    fsync_dir(tmp_path)
    assert synced == [str(tmp_path)]
