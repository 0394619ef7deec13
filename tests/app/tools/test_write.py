"""The write tool (docs/design/agent.md#write): parent folders, byte counts, overwrites, errors."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from coding_agent.worker.tools import EDIT_TOOL, WRITE_TOOL, ToolContext


@pytest.mark.anyio
async def test_write_creates_parent_folders_and_counts_utf8_bytes(tmp_path: Path) -> None:
    tools = ToolContext(cwd=tmp_path)
    result = await WRITE_TOOL.execute({"path": "a/b/c.txt", "content": "héllo\n"}, tools)
    assert not result.is_error
    assert result.plain_text == "Successfully wrote 7 bytes to a/b/c.txt"
    assert (tmp_path / "a" / "b" / "c.txt").read_bytes() == "héllo\n".encode()
    assert result.details == {"path": str(tmp_path / "a" / "b" / "c.txt"), "bytes": 7}


@pytest.mark.anyio
async def test_write_overwrites_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old content that is longer")
    tools = ToolContext(cwd=tmp_path)
    await WRITE_TOOL.execute({"path": "f.txt", "content": "new"}, tools)
    assert (tmp_path / "f.txt").read_text() == "new"


@pytest.mark.anyio
async def test_writing_onto_a_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = await WRITE_TOOL.execute({"path": "d", "content": "x"}, ToolContext(cwd=tmp_path))
    assert result.is_error
    assert result.plain_text == "Cannot write d: it is a directory"


@pytest.mark.anyio
async def test_writing_below_a_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    result = await WRITE_TOOL.execute(
        {"path": "f/g.txt", "content": "x"}, ToolContext(cwd=tmp_path)
    )
    assert result.is_error
    assert result.plain_text.startswith("Cannot write f/g.txt:")


@pytest.mark.anyio
async def test_concurrent_write_and_edit_of_one_file_serialise(tmp_path: Path) -> None:
    # Both calls go through the per-file lock, so the edit sees either the old or the new
    # content in full, never a half-written file; the final file is one of the two outcomes.
    target = tmp_path / "f.txt"
    target.write_text("alpha\n")
    tools = ToolContext(cwd=tmp_path)
    results = {}

    async def write() -> None:
        results["write"] = await WRITE_TOOL.execute({"path": "f.txt", "content": "beta\n"}, tools)

    async def edit() -> None:
        results["edit"] = await EDIT_TOOL.execute(
            {"path": "f.txt", "edits": [{"oldText": "alpha", "newText": "gamma"}]}, tools
        )

    async with anyio.create_task_group() as group:
        group.start_soon(write)
        group.start_soon(edit)
    assert not results["write"].is_error
    assert target.read_text() in {"beta\n", "gamma\n"}
    if results["edit"].is_error:
        assert target.read_text() == "beta\n"
