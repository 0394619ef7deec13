"""Read before edit (issue 14 item 7): ``write`` and ``edit`` of an existing file need a read of
its current content in this conversation; what the agent wrote itself counts as read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_agent.worker.tools import EDIT_TOOL, READ_TOOL, WRITE_TOOL, ToolContext
from coding_agent.worker.tools.files import MemoryReadLedger

pytestmark = pytest.mark.anyio


@pytest.fixture
def tools(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=tmp_path, reads=MemoryReadLedger())


def edit(old: str, new: str) -> dict[str, object]:
    return {"path": "a.txt", "edits": [{"oldText": old, "newText": new}]}


async def test_an_unread_file_is_refused_with_a_read_it_first_message(
    tmp_path: Path, tools: ToolContext
) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    refused = await EDIT_TOOL.execute(edit("one", "two"), tools)
    assert refused.is_error
    assert refused.plain_text.startswith("a.txt exists but has not been read in this conversation.")
    assert "Read it first with the read tool" in refused.plain_text
    assert refused.details == {"reason": "not_read"}
    overwrite = await WRITE_TOOL.execute({"path": "a.txt", "content": "x"}, tools)
    assert overwrite.is_error and "has not been read" in overwrite.plain_text
    assert (tmp_path / "a.txt").read_text() == "one\n"  # untouched

    await READ_TOOL.execute({"path": "a.txt"}, tools)
    assert not (await EDIT_TOOL.execute(edit("one", "two"), tools)).is_error
    assert (tmp_path / "a.txt").read_text() == "two\n"


async def test_a_file_changed_on_disk_since_the_read_is_refused(
    tmp_path: Path, tools: ToolContext
) -> None:
    target = tmp_path / "a.txt"
    target.write_text("one\n")
    await READ_TOOL.execute({"path": "a.txt"}, tools)
    target.write_text("one and more\n")  # someone else changed it
    refused = await EDIT_TOOL.execute(edit("one", "two"), tools)
    assert refused.is_error
    assert refused.plain_text.startswith("a.txt has changed on disk since you last read it")
    assert refused.details == {"reason": "changed_since_read"}
    assert target.read_text() == "one and more\n"
    await READ_TOOL.execute({"path": "a.txt"}, tools)
    assert not (await EDIT_TOOL.execute(edit("more", "less"), tools)).is_error


async def test_same_size_same_mtime_but_other_bytes_is_caught_by_the_hash(
    tmp_path: Path, tools: ToolContext
) -> None:
    target = tmp_path / "a.txt"
    target.write_text("aaaa\n")
    await READ_TOOL.execute({"path": "a.txt"}, tools)
    before = target.stat()
    target.write_text("bbbb\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    refused = await WRITE_TOOL.execute({"path": "a.txt", "content": "c"}, tools)
    assert refused.is_error and "changed on disk" in refused.plain_text


async def test_a_touch_that_keeps_the_content_is_not_a_change(
    tmp_path: Path, tools: ToolContext
) -> None:
    target = tmp_path / "a.txt"
    target.write_text("one\n")
    await READ_TOOL.execute({"path": "a.txt"}, tools)
    os.utime(target, ns=(1, 1))
    assert not (await EDIT_TOOL.execute(edit("one", "two"), tools)).is_error


async def test_what_the_agent_created_or_wrote_counts_as_read(
    tmp_path: Path, tools: ToolContext
) -> None:
    created = await WRITE_TOOL.execute({"path": "a.txt", "content": "one\n"}, tools)
    assert not created.is_error  # a new file needs no read
    assert not (await EDIT_TOOL.execute(edit("one", "two"), tools)).is_error
    assert not (await EDIT_TOOL.execute(edit("two", "three"), tools)).is_error
    again = await WRITE_TOOL.execute({"path": "a.txt", "content": "four\n"}, tools)
    assert not again.is_error
    assert (tmp_path / "a.txt").read_text() == "four\n"


async def test_a_symlink_and_its_target_share_one_read(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "real.txt").write_text("one\n")
    (tmp_path / "a.txt").symlink_to("real.txt")
    await READ_TOOL.execute({"path": "real.txt"}, tools)
    assert not (await EDIT_TOOL.execute(edit("one", "two"), tools)).is_error


async def test_writing_onto_a_fifo_is_refused_without_blocking(
    tmp_path: Path, tools: ToolContext
) -> None:
    os.mkfifo(tmp_path / "pipe")
    result = await WRITE_TOOL.execute({"path": "pipe", "content": "x"}, tools)
    assert result.is_error
    assert result.plain_text == "Cannot write pipe: it is a FIFO (named pipe), not a regular file"
