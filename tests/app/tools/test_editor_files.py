"""The file tools with an editor's buffers in the context (``ToolContext.editor``, what
``coding-agent acp`` gives them): the editor's text is read and edited, the disk is the fallback,
and the read-before-edit stamps hold across both."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent.worker.tools import EDIT_TOOL, READ_TOOL, WRITE_TOOL, ToolContext
from coding_agent.worker.tools.files import MemoryReadLedger

pytestmark = pytest.mark.anyio


class Buffers:
    """An editor holding ``texts`` by path (an :class:`~coding_agent.worker.tools.EditorFiles`);
    ``writes`` False: it reads but does not write; ``refuse``: it refuses writes."""

    def __init__(self, texts: dict[Path, str], *, writes: bool = True, refuse: str = "") -> None:
        self.texts = texts
        self.writes = writes
        self.refuse = refuse

    async def read_text(self, path: Path) -> str | None:
        return self.texts.get(path)

    async def write_text(self, path: Path, text: str) -> bool:
        if self.refuse:
            raise OSError(f"the editor refused the write: {self.refuse}")
        if not self.writes:
            return False
        self.texts[path] = text
        return True


def edit(old: str, new: str) -> dict[str, object]:
    return {"path": "a.txt", "edits": [{"oldText": old, "newText": new}]}


async def test_an_editor_that_reads_but_does_not_write_gets_its_text_edited_on_disk(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("on disk\n")
    editor = Buffers({path: "in the buffer\n"}, writes=False)
    tools = ToolContext(cwd=tmp_path, reads=MemoryReadLedger(), editor=editor)
    shown = await READ_TOOL.execute({"path": "a.txt"}, tools)
    assert shown.plain_text == "in the buffer"
    assert not (await EDIT_TOOL.execute(edit("buffer", "file"), tools)).is_error
    assert path.read_text() == "in the file\n"  # the buffer's text, edited, on disk

    del editor.texts[path]  # the editor closed it: the disk, whose stamp the edit recorded
    assert not (await EDIT_TOOL.execute(edit("file", "end"), tools)).is_error
    assert path.read_text() == "in the end\n"


async def test_a_refused_write_fails_the_call_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("one\n")
    editor = Buffers({path: "one\n"}, refuse="read-only buffer")
    tools = ToolContext(cwd=tmp_path, reads=MemoryReadLedger(), editor=editor)
    await READ_TOOL.execute({"path": "a.txt"}, tools)
    refused = await EDIT_TOOL.execute(edit("one", "two"), tools)
    assert refused.is_error
    assert (
        refused.plain_text == "Cannot write a.txt: the editor refused the write: read-only buffer"
    )
    written = await WRITE_TOOL.execute({"path": "a.txt", "content": "x"}, tools)
    assert written.is_error and "read-only buffer" in written.plain_text
    assert path.read_text() == "one\n" and editor.texts[path] == "one\n"


async def test_a_binary_file_is_read_from_disk_even_with_a_buffer(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x00\x01binary")
    tools = ToolContext(cwd=tmp_path, editor=Buffers({path: "text?"}))
    shown = await READ_TOOL.execute({"path": "blob.bin"}, tools)
    assert "is a binary file" in shown.plain_text
