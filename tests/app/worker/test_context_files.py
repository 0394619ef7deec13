"""AGENTS.md / CLAUDE.md discovery and rendering (issue 8 item 7)."""

from __future__ import annotations

from pathlib import Path

from coding_agent.worker.context_files import (
    MAX_FILE_CHARS,
    find_context_files,
    render_context_files,
)


def test_files_come_from_ancestors_outermost_first(tmp_path: Path) -> None:
    inner = tmp_path / "repo" / "pkg"
    inner.mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("outer\n")
    (tmp_path / "repo" / "CLAUDE.md").write_text("middle\n")
    (inner / "AGENTS.md").write_text("inner\n")
    found = find_context_files(inner)
    ours = [f for f in found if f.path.startswith(str(tmp_path))]
    assert [(Path(f.path), f.content) for f in ours] == [
        (tmp_path / "AGENTS.md", "outer\n"),
        (tmp_path / "repo" / "CLAUDE.md", "middle\n"),
        (inner / "AGENTS.md", "inner\n"),
    ]


def test_agents_md_is_preferred_over_claude_md_in_one_folder(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("agents\n")
    (tmp_path / "CLAUDE.md").write_text("claude\n")
    ours = [f for f in find_context_files(tmp_path) if f.path.startswith(str(tmp_path))]
    assert [f.content for f in ours] == ["agents\n"]


def test_blank_files_and_folders_named_like_the_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("  \n")
    (tmp_path / "CLAUDE.md").mkdir()
    assert [f for f in find_context_files(tmp_path) if f.path.startswith(str(tmp_path))] == []


def test_a_huge_file_is_capped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * (MAX_FILE_CHARS + 10))
    (found,) = [f for f in find_context_files(tmp_path) if f.path.startswith(str(tmp_path))]
    assert found.content.startswith("x" * MAX_FILE_CHARS)
    assert found.content.endswith(f"[AGENTS.md truncated at {MAX_FILE_CHARS} characters]")


def test_the_section_names_each_file_above_its_text() -> None:
    text = render_context_files(
        {
            "files": [
                {"path": "/a/AGENTS.md", "content": "one\n"},
                {"path": "/b/CLAUDE.md", "content": "two"},
            ]
        }
    )
    assert text.splitlines()[0].startswith("Project instructions from context files")
    assert "### /a/AGENTS.md\n\none\n\n### /b/CLAUDE.md\n\ntwo" in text
