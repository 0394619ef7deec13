"""The memory of notes told once (:mod:`coding_agent.settings.told_notes`) on real files: a
``model`` note is told the first time, quiet after (in a later worker), told again for a new
value, kept for the whole run that told it; a memory that cannot be read or written tells it
again rather than losing it; safety notes are never quiet."""

from __future__ import annotations

import json
from pathlib import Path

from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.told_notes import ToldNotes


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
    }


def _write(tmp_path: Path, data: dict[str, object]) -> Path:
    path = tmp_path / "claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _keys(files: PermissionFiles) -> list[str]:
    return [p.split("`")[1] for p in files.load()["problems"] if "`" in p]


def test_a_model_note_is_told_once_per_value(tmp_path: Path) -> None:
    env = _env(tmp_path)
    (tmp_path / "project").mkdir()
    _write(tmp_path, {"model": "opus", "sandbox": {"enabled": True}})
    worker = PermissionFiles(tmp_path / "project", env, told=ToldNotes.default(env))
    assert _keys(worker) == ["model", "sandbox.enabled"]
    _write(tmp_path, {"model": "opus", "sandbox": {"enabled": True}, "x": 1})
    assert "model" in _keys(worker), "the run that told it keeps telling it"
    later = PermissionFiles(tmp_path / "project", env, told=ToldNotes.default(env))
    assert _keys(later) == ["sandbox.enabled", "x"]  # safety notes every time
    assert "model" in _keys(PermissionFiles(tmp_path / "project", env)), "config lists it"
    _write(tmp_path, {"model": "sonnet"})
    assert _keys(PermissionFiles(tmp_path / "project", env, told=ToldNotes.default(env))) == [
        "model"
    ]
    stored = (tmp_path / "state" / "coding-agent" / "told-notes.json").read_text()
    assert "sonnet" not in stored and "opus" not in stored  # digests, not the values


def test_a_memory_that_cannot_be_kept_tells_the_note_again(tmp_path: Path) -> None:
    data = {"model": "opus"}
    path = _write(tmp_path, data)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    assert ToldNotes(corrupt).quiet(path, data) == frozenset()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    unwritable = ToldNotes(blocked / "told-notes.json")  # its folder cannot be made
    assert unwritable.quiet(path, data) == frozenset()
    assert ToldNotes(blocked / "told-notes.json").quiet(path, data) == frozenset()
