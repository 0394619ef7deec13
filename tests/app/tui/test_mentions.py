"""``@file`` mentions and Tab path completion in the prompt editor (docs/design/agent.md#features)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.complete import FileIndex, common_prefix, complete_path, scan_files
from coding_agent.tui.widgets.editor import mention

pytestmark = pytest.mark.anyio

VISIBLE = ["src/app.py", "src/util/helpers.py", "README.md", ".gitignore", "src/util/notes.txt"]
HIDDEN = ["build/out.py", "debug.log", "node_modules/pkg/index.js", ".venv/lib/x.py", ".git/HEAD"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in [*VISIBLE, *HIDDEN]:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    (tmp_path / ".gitignore").write_text("build/\n*.log\n")
    return tmp_path


@pytest.fixture
def in_project(conversation, project: Path):
    conversation.session = dataclasses.replace(conversation.session, cwd=str(project))
    return conversation


def _labels(app: CodingAgentApp) -> list[str]:
    return [item.label for item in app.editor.palette.suggestions]


# -- the file list -----------------------------------------------------------------------------
def test_scan_lists_files_breadth_first_and_skips_ignored_ones(project: Path) -> None:
    assert scan_files(project) == [".gitignore", "README.md", "src/app.py", *sorted(VISIBLE[1::3])]
    assert sorted(scan_files(project)) == sorted(VISIBLE)


def test_scan_stops_at_the_limit_and_tolerates_a_missing_root(project: Path) -> None:
    assert scan_files(project, limit=2) == [".gitignore", "README.md"]
    assert scan_files(project / "absent") == []


async def test_the_index_rescans_only_when_stale(project: Path) -> None:
    now = [0.0]
    index = FileIndex(project, max_age=5.0, clock=lambda: now[0])
    assert index.stale and index.files == ()
    assert sorted(await index.refresh()) == sorted(VISIBLE)
    (project / "new.py").write_text("")
    now[0] = 4.0
    assert not index.stale
    assert "new.py" not in await index.refresh(), "a fresh list is reused"
    now[0] = 5.0
    assert "new.py" in await index.refresh()


# -- path completion ---------------------------------------------------------------------------
def test_complete_path_lists_entries_with_folders_marked(project: Path) -> None:
    assert complete_path("src/", project) == ["src/app.py", "src/util/"]
    assert complete_path("./src/u", project) == ["./src/util/"]
    assert complete_path("src/util/n", project) == ["src/util/notes.txt"]
    assert complete_path("src/zz", project) == []
    assert complete_path("missing/", project) == []
    assert complete_path(f"{project}/REA", Path("/")) == [f"{project}/README.md"]
    assert "./.gitignore" not in complete_path("./", project), "dot entries need a leading dot"
    assert "./.gitignore" in complete_path("./.", project)


def test_common_prefix() -> None:
    assert common_prefix([]) == ""
    assert common_prefix(["src/util/", "src/utils.py"]) == "src/util"
    assert common_prefix(["a", "b"]) == ""


# -- in the app ----------------------------------------------------------------------------------
async def test_at_lists_the_project_files_without_ignored_ones(in_project, docs) -> None:
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"look at @")
        await app.editor.file_index.refresh()  # joins the scan the keystroke started
        await docs.until(pilot, lambda: app.editor.palette.display)
        assert sorted(_labels(app)) == sorted(VISIBLE)
        assert _labels(app)[0] == "README.md", "shorter paths first for an empty query"


async def test_accepting_a_mention_inserts_its_path(in_project, docs) -> None:
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await app.editor.file_index.refresh()
        await pilot.press(*"fix @help")
        await docs.until(pilot, lambda: _labels(app)[:1] == ["src/util/helpers.py"])
        await pilot.press("tab")
        assert app.editor.text == "fix @src/util/helpers.py "
        await docs.until(pilot, lambda: not app.editor.palette.display)

        await pilot.press(*"and @sapp")
        await docs.until(pilot, lambda: _labels(app)[:1] == ["src/app.py"])
        await pilot.press("enter")
        assert app.editor.text == "fix @src/util/helpers.py and @src/app.py "
        assert in_project.sent == [], "enter accepted the mention instead of sending"
        await pilot.press("enter")
        await docs.until(pilot, lambda: in_project.sent)
        [(content, mode)] = in_project.sent
        assert mode == "prompt"
        # the prompt as typed, then each mentioned file attached (context/mentions.py)
        assert [block["text"].split("\n", 1)[0] for block in content] == [
            "fix @src/util/helpers.py and @src/app.py ",
            "[📎 src/util/helpers.py (1 line)]",
            "[📎 src/app.py (1 line)]",
        ]


async def test_a_mention_in_the_middle_of_the_text_replaces_only_its_word(in_project, docs) -> None:
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await app.editor.file_index.refresh()
        await pilot.press(*"see @rea please", *["left"] * 7)
        await docs.until(pilot, lambda: _labels(app)[:1] == ["README.md"])
        await pilot.press("tab")
        assert app.editor.text == "see @README.md please", "no doubled space"
        assert app.editor.cursor_location == (0, len("see @README.md"))


async def test_tab_completes_a_folder_then_a_unique_file(in_project, docs) -> None:
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"open src/u", "tab")
        assert app.editor.text == "open src/util/"
        await pilot.press("h", "tab")
        assert app.editor.text == "open src/util/helpers.py"
        assert not app.editor.palette.display
        assert app.focused is app.editor


async def test_tab_with_several_paths_opens_the_dropdown(in_project, docs) -> None:
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"./src/", "tab")
        await docs.until(pilot, lambda: _labels(app) == ["app.py", "util/"])
        assert app.editor.text == "./src/"
        await pilot.press("down", "enter")
        assert app.editor.text == "./src/util/"
        await docs.until(pilot, lambda: not app.editor.palette.display)
        assert in_project.sent == []

        await pilot.press("tab")
        await docs.until(pilot, lambda: _labels(app) == ["helpers.py", "notes.txt"])
        await pilot.press("n")
        await docs.until(pilot, lambda: not app.editor.palette.display)
        await pilot.press("tab")
        assert app.editor.text == "./src/util/notes.txt"


async def test_tab_completes_an_absolute_path_typed_like_a_command(
    in_project, project: Path, docs
) -> None:
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        app.editor.load_text(f"{project}/READ")
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press("tab")
        assert app.editor.text == f"{project}/README.md"
        app.editor.load_text("/bi")
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press("tab")
        expected = complete_path("/bi", project)  # /bin/ on any Unix
        assert expected, "the test expects something under / starting with bi"
        completed = expected[0] if len(expected) == 1 else common_prefix(expected)
        assert app.editor.text == completed, "no command matches /bi: it completes as a path"


async def test_tab_on_a_plain_word_still_moves_focus(in_project, docs) -> None:
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"hello", "tab")
        assert app.editor.text == "hello"
        assert app.focused is not app.editor


def test_a_mention_quotes_a_path_with_spaces_or_quotes() -> None:
    assert mention("src/app.py") == "@src/app.py"
    assert mention("docs/My Notes.md") == '@"docs/My Notes.md"'
    assert mention('odd "name".txt') == '@"odd \\"name\\".txt"'
    assert mention("back\\slash") == '@"back\\\\slash"'


async def test_accepting_a_mention_of_a_spaced_path_quotes_it(in_project, docs) -> None:
    (Path(in_project.session.cwd) / "docs").mkdir()
    (Path(in_project.session.cwd) / "docs" / "Release Notes.md").write_text("x\n")
    app = CodingAgentApp(in_project)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await app.editor.file_index.refresh()
        await pilot.press(*"see @releasen")
        await docs.until(pilot, lambda: _labels(app)[:1] == ["docs/Release Notes.md"])
        await pilot.press("tab")
        assert app.editor.text == 'see @"docs/Release Notes.md" '
