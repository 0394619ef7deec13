"""The edit tool (docs/design/agent.md#edit): exact multi-edit, clear errors, nothing half-applied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.worker.tools import EDIT_TOOL, ToolContext, ToolError
from coding_agent.worker.tools.edit import Edit, apply_edits


@pytest.fixture
def tools(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=tmp_path)


def edit_args(path: str, *pairs: tuple[str, str]) -> dict[str, object]:
    return {"path": path, "edits": [{"oldText": old, "newText": new} for old, new in pairs]}


@pytest.mark.anyio
async def test_single_edit_replaces_and_reports_a_diff(tmp_path: Path, tools: ToolContext) -> None:
    target = tmp_path / "m.py"
    target.write_text("def f():\n    return 1\n")
    result = await EDIT_TOOL.execute(edit_args("m.py", ("return 1", "return 2")), tools)
    assert not result.is_error
    assert result.plain_text == "Successfully replaced 1 block in m.py."
    assert target.read_text() == "def f():\n    return 2\n"
    assert result.details["first_changed_line"] == 2
    assert "-    return 1\n+    return 2\n" in result.details["patch"]
    assert result.details["patch"].startswith("--- a/m.py\n+++ b/m.py\n")
    assert "-2     return 1" in result.details["diff"]
    assert "+2     return 2" in result.details["diff"]


@pytest.mark.anyio
async def test_all_edits_match_the_original_content(tmp_path: Path, tools: ToolContext) -> None:
    # Applied one after another, "a"->"b" then "b"->"c" would touch line 1 twice.
    target = tmp_path / "f.txt"
    target.write_text("a\nb\n")
    result = await EDIT_TOOL.execute(edit_args("f.txt", ("a\n", "b\n"), ("b\n", "c\n")), tools)
    assert result.plain_text == "Successfully replaced 2 blocks in f.txt."
    assert target.read_text() == "b\nc\n"


@pytest.mark.anyio
async def test_not_found_names_the_edit_and_shows_the_closest_region(
    tmp_path: Path, tools: ToolContext
) -> None:
    target = tmp_path / "f.py"
    original = "import os\n\n\ndef compute(value):\n    total = value * 2\n    return total\n"
    target.write_text(original)
    result = await EDIT_TOOL.execute(
        edit_args("f.py", ("import os", "import sys"), ("    total = value * 3\n", "x")), tools
    )
    assert result.is_error
    assert result.plain_text.startswith(
        "Could not find edits[1] in f.py. The old text must match exactly including all "
        "whitespace and newlines.\nClosest match is around line 5:\n"
    )
    assert "  5:     total = value * 2" in result.plain_text
    assert "  4: def compute(value):" in result.plain_text
    assert target.read_text() == original  # the valid first edit was not written either


@pytest.mark.anyio
async def test_single_edit_not_found_uses_pis_wording(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "f.txt").write_text("alpha\n")
    result = await EDIT_TOOL.execute(edit_args("f.txt", ("zzzzzzzzzz", "y")), tools)
    assert result.plain_text.startswith("Could not find the exact text in f.txt.")
    assert "File starts with:\n  1: alpha" in result.plain_text


@pytest.mark.anyio
async def test_ambiguous_match_is_rejected(tmp_path: Path, tools: ToolContext) -> None:
    target = tmp_path / "f.txt"
    target.write_bytes(b"x = 1\ny = 2\nx = 1\n")
    result = await EDIT_TOOL.execute(
        edit_args("f.txt", ("y = 2", "y = 3"), ("x = 1", "x = 0")), tools
    )
    assert result.is_error
    assert result.plain_text == (
        "Found 2 occurrences of edits[1] in f.txt. Each oldText must be unique. "
        "Please provide more context to make it unique."
    )
    assert result.details == {"edit": 1, "occurrences": 2}
    assert target.read_bytes() == b"x = 1\ny = 2\nx = 1\n"


@pytest.mark.anyio
async def test_overlapping_edits_are_rejected(tmp_path: Path, tools: ToolContext) -> None:
    target = tmp_path / "f.txt"
    target.write_text("one two three\n")
    result = await EDIT_TOOL.execute(
        edit_args("f.txt", ("one two", "1 2"), ("two three", "2 3")), tools
    )
    assert result.is_error
    assert result.plain_text.startswith("edits[0] and edits[1] overlap in f.txt.")
    assert target.read_text() == "one two three\n"


@pytest.mark.anyio
async def test_fuzzy_fallback_tolerates_trailing_spaces_and_smart_quotes(
    tmp_path: Path, tools: ToolContext
) -> None:
    target = tmp_path / "f.py"
    target.write_bytes("keep = 1   \nmsg = “hello”  \nend = 2\n".encode())
    result = await EDIT_TOOL.execute(edit_args("f.py", ('msg = "hello"\n', 'msg = "bye"\n')), tools)
    assert not result.is_error, result.plain_text
    # Only the touched line changes; the untouched line keeps its trailing spaces.
    assert target.read_bytes() == b'keep = 1   \nmsg = "bye"\nend = 2\n'


@pytest.mark.anyio
async def test_crlf_line_endings_and_bom_are_kept(tmp_path: Path, tools: ToolContext) -> None:
    target = tmp_path / "win.txt"
    target.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\n")
    result = await EDIT_TOOL.execute(
        edit_args("win.txt", ("line two\nline three", "second\nthird\nfourth")), tools
    )
    assert not result.is_error, result.plain_text
    assert target.read_bytes() == b"\xef\xbb\xbfline one\r\nsecond\r\nthird\r\nfourth\r\n"
    assert result.details["line_ending"] == "crlf"
    assert result.details["bom"] is True


@pytest.mark.anyio
async def test_legacy_single_form_and_json_string_edits_are_accepted(
    tmp_path: Path, tools: ToolContext
) -> None:
    target = tmp_path / "f.txt"
    target.write_text("a b c\n")
    legacy = await EDIT_TOOL.execute({"path": "f.txt", "oldText": "a", "newText": "A"}, tools)
    assert not legacy.is_error
    encoded = json.dumps([{"oldText": "b", "newText": "B"}, {"oldText": "c", "newText": "C"}])
    stringly = await EDIT_TOOL.execute({"path": "f.txt", "edits": encoded}, tools)
    assert not stringly.is_error
    assert target.read_text() == "A B C\n"


@pytest.mark.anyio
async def test_json_string_edits_are_validated_too(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "f.txt").write_text("a\n")
    result = await EDIT_TOOL.execute({"path": "f.txt", "edits": '[{"oldText": "a"}]'}, tools)
    assert result.is_error
    assert result.details["problems"] == ["arguments.edits[0].newText: is required"]
    assert result.plain_text.startswith("Invalid arguments for tool 'edit': ")


@pytest.mark.anyio
async def test_identical_result_empty_old_text_and_missing_file_are_errors(
    tmp_path: Path, tools: ToolContext
) -> None:
    (tmp_path / "f.txt").write_text("same\n")
    noop = await EDIT_TOOL.execute(edit_args("f.txt", ("same", "same")), tools)
    assert noop.is_error and noop.plain_text.startswith("No changes made to f.txt.")
    empty = await EDIT_TOOL.execute(edit_args("f.txt", ("", "x")), tools)
    assert empty.is_error and empty.plain_text == "oldText must not be empty in f.txt."
    missing = await EDIT_TOOL.execute(edit_args("gone.txt", ("a", "b")), tools)
    assert missing.is_error and missing.plain_text == "File not found: gone.txt"
    neither = await EDIT_TOOL.execute({"path": "f.txt"}, tools)
    assert neither.is_error and neither.details["problems"] == ["arguments.edits: is required"]


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(
        st.text(alphabet="abcxyz", min_size=3, max_size=6), min_size=2, max_size=8, unique=True
    ),
    data=st.data(),
)
def test_distinct_unique_lines_are_each_replaced_exactly(
    words: list[str], data: st.DataObject
) -> None:
    lines = [f"<{word}>" for word in words]
    content = "\n".join(lines) + "\n"
    chosen = data.draw(st.sets(st.sampled_from(range(len(lines))), min_size=1))
    edits = [Edit(lines[i], f"[{i}]") for i in sorted(chosen)]
    result = apply_edits(content, edits, "f")
    expected = [f"[{i}]" if i in chosen else line for i, line in enumerate(lines)]
    assert result == "\n".join(expected) + "\n"


def test_apply_edits_raises_tool_error_for_a_duplicate_across_lines() -> None:
    with pytest.raises(ToolError, match="Found 3 occurrences of the text in f"):
        apply_edits("ab\nab\nab\n", [Edit("ab", "cd")], "f")
