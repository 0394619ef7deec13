"""Any file name, and spill files that do not pile up (issue 24 item 10)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from coding_agent.worker.tools import BASH_TOOL, FIND_TOOL, LS_TOOL, ToolContext
from coding_agent.worker.tools.bash import SPILL_RETENTION, prune_spills

pytestmark = pytest.mark.anyio


def make_bad_names(folder: Path) -> None:
    raw = os.fsencode(folder)
    for name in (b"bad\xff.txt", b"caf\xc3\xa9.txt", b"plain.txt"):
        (Path(os.fsdecode(raw + b"/" + name))).write_text("x\n")
    os.mkdir(raw + b"/dir\xfe")


async def test_ls_lists_names_that_are_not_utf8_with_their_bytes_escaped(tmp_path: Path) -> None:
    make_bad_names(tmp_path)
    result = await LS_TOOL.execute({}, ToolContext(cwd=tmp_path))
    assert not result.is_error
    assert result.plain_text.split("\n") == ["bad\\xff.txt", "café.txt", "dir\\xfe/", "plain.txt"]
    result.plain_text.encode("utf-8")  # storable: no lone surrogates left


async def test_find_results_with_such_names_are_storable_too(tmp_path: Path) -> None:
    make_bad_names(tmp_path)
    for backend in ("python", "auto"):
        tools = ToolContext(cwd=tmp_path, search_backend=backend)
        result = await FIND_TOOL.execute({"pattern": "*.txt"}, tools)
        assert not result.is_error
        assert len(result.plain_text.split("\n")) == 3 and "plain.txt" in result.plain_text
        result.plain_text.encode("utf-8")  # ripgrep shows U+FFFD, the Python search \xff


async def test_old_spill_files_go_when_a_new_one_is_made(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    old = spill / "coding-agent-bash-old.log"
    fresh = spill / "coding-agent-bash-fresh.log"
    other = spill / "notes.txt"
    for path in (old, fresh, other):
        path.write_text("x")
    long_ago = time.time() - SPILL_RETENTION - 3600
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    tools = ToolContext(cwd=tmp_path, temp_dir=str(spill))
    result = await BASH_TOOL.execute({"command": "seq 1 30000"}, tools)
    new = Path(result.details["full_output_path"])
    assert new.parent == spill and (await anyio.Path(new).read_text()).endswith("30000\n")
    assert not old.exists()  # past the retention period
    assert fresh.exists() and other.exists()  # recent, and not a spill file
    assert prune_spills(spill) == 0
    assert prune_spills(tmp_path / "missing") == 0
