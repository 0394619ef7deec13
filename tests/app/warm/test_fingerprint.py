"""The warm start's fingerprint (coding_agent.warm.fingerprint) covers the files and folders the
preload read code from beside the modules' files (the feature packages' sources): a file
changed, added or removed makes it stale, naming what changed."""

from __future__ import annotations

import os
from pathlib import Path

from coding_agent.warm.fingerprint import Fingerprint

OLD = 1_000_000_000_000_000_000  # a time long past, in nanoseconds: any change later is newer


def _taken(folder: Path, module: Path) -> Fingerprint:
    for path in (module, folder):
        os.utime(path, ns=(OLD, OLD))
    fingerprint = Fingerprint.take(set(), env={}, sources=[str(folder), str(module)])
    assert fingerprint.stale_files() is None
    assert fingerprint.stale({}) is None
    return fingerprint


def test_a_changed_added_or_removed_source_makes_the_fingerprint_stale(tmp_path: Path) -> None:
    folder = tmp_path / "greeter"
    folder.mkdir()
    module = folder / "tui.py"  # a module the preload only compiled: in no module table
    module.write_text("GREETING = 'hello'\n")

    fingerprint = _taken(folder, module)
    module.write_text("GREETING = 'hallo'\n")  # same size: the time tells
    assert fingerprint.stale_files() == f"{module} changed"
    assert fingerprint.stale({}) == f"{module} changed"

    fingerprint = _taken(folder, module)
    (folder / "added.py").write_text("")
    assert fingerprint.stale_files() == f"{folder} changed"

    fingerprint = _taken(folder, module)
    (folder / "added.py").unlink()
    assert fingerprint.stale_files() == f"{folder} changed"

    fingerprint = _taken(folder, module)
    module.unlink()
    assert fingerprint.stale_files() == f"{folder} changed"  # the folder is listed first
    os.utime(folder, ns=(OLD, OLD))
    assert fingerprint.stale_files() == f"{module} changed"  # and the file itself is gone


def test_the_terminal_size_read_while_building_the_parser_is_not_a_dependency() -> None:
    """argparse reads ``COLUMNS``/``LINES`` while the parser is built (a throwaway formatter) and
    again for every help it prints: a client exporting them is served; another variable the
    preload read is still compared."""
    read = {"COLUMNS", "LINES", "OPENAI_LOG"}
    fingerprint = Fingerprint.take(read, env={})
    assert fingerprint.stale({"COLUMNS": "132", "LINES": "43"}) is None
    assert fingerprint.stale({"OPENAI_LOG": "debug"}) == "$OPENAI_LOG differs from the server's"
