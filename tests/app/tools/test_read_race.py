"""``read`` (and ``grep``/``find``/``ls``) read exactly what was checked, never through a symlink
swapped in since (docs/design/agent.md#write): a folder on the way replaced by a link to
``~/.ssh`` or to a folder holding a denied ``.env``, between the approval's check and the open,
fails the call and reads nothing; a symlink that is part of the project keeps working.

Real files and real symlinks: the swap happens in the tool's ``before_read`` hook (after the
tool resolved the path, the last point before the open), before the tool runs at all (after the
approval's check: ``checked_target``), or by a process exchanging the two names in a loop.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from coding_agent.worker.tools import (
    FIND_TOOL,
    GREP_TOOL,
    LS_TOOL,
    READ_TOOL,
    ToolContext,
    ToolSpec,
)
from coding_agent.worker.tools.exact import TargetChanged, open_exact
from coding_agent.worker.tools.search import ripgrep_path
from facets_approval.searched import read_target
from tests.app.tools._race import race, real_path, swap_folder, swapping

NOTES = "meeting notes\n"
SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n"

pytestmark = pytest.mark.anyio


def _project(tmp_path: Path, protected: str) -> tuple[Path, Path]:
    """A project with ``d/notes.txt`` and a folder holding a secret under the same name: a
    stand-in for ``~/.ssh`` outside the project, or a folder of the project whose files a deny
    rule covers (``.env``-like)."""
    project = tmp_path / "project"
    (project / "d").mkdir(parents=True)
    (project / "d" / "notes.txt").write_text(NOTES)
    secrets = tmp_path / "home" / ".ssh" if protected == "ssh" else project / "private"
    secrets.mkdir(parents=True)
    (secrets / "notes.txt").write_text(SECRET)
    return project, secrets


def _picture(path: Path, size: tuple[int, int]) -> None:
    from PIL import Image

    Image.new("RGB", size, (200, 30, 60)).save(path, "PNG")


def _swap_in_link(project: Path, secrets: Path) -> Callable[[Path], Awaitable[None]]:
    """A ``before_read`` that replaces the folder ``d`` by a symlink to ``secrets``."""

    async def before_read(path: Path) -> None:
        del path
        swap_folder(project, secrets)

    return before_read


def _checked(project: Path, tool: str, path: str) -> str:
    """What the approval resolved the call's path to (and left for the tool)."""
    real = read_target(tool, {"path": path}, str(project), str(project.parent / "home"))
    assert real is not None
    return real


@pytest.mark.parametrize("protected", ["ssh", "denied"])
async def test_a_read_whose_folder_becomes_a_symlink_reads_nothing_through_it(
    tmp_path: Path, protected: str
) -> None:
    project, secrets = _project(tmp_path, protected)
    tools = ToolContext(cwd=project, before_read=_swap_in_link(project, secrets))
    result = await READ_TOOL.execute({"path": "d/notes.txt"}, tools)
    assert result.is_error
    assert result.plain_text == (
        f"Cannot read d/notes.txt: {project}/d/notes.txt changed while the call ran (a symlink "
        f"appeared on the way: {project}/d); nothing was read."
    )
    assert "secret" not in result.plain_text
    assert result.details["reason"] == "path_changed"


async def test_a_read_whose_file_becomes_a_symlink_reads_nothing_through_it(
    tmp_path: Path,
) -> None:
    project, secrets = _project(tmp_path, "ssh")

    async def before_read(path: Path) -> None:
        os.rename(path, project / "d" / "notes.away")
        os.symlink(secrets / "notes.txt", path)

    tools = ToolContext(cwd=project, before_read=before_read)
    result = await READ_TOOL.execute({"path": "d/notes.txt"}, tools)
    assert result.is_error and "secret" not in result.plain_text
    assert "changed while the call ran (a symlink appeared on the way" in result.plain_text


async def test_a_listing_whose_folder_becomes_a_symlink_lists_nothing_through_it(
    tmp_path: Path,
) -> None:
    project, secrets = _project(tmp_path, "ssh")
    (secrets / "id_rsa").write_text(SECRET)
    tools = ToolContext(cwd=project, before_read=_swap_in_link(project, secrets))
    result = await LS_TOOL.execute({"path": "d"}, tools)
    assert result.is_error and "id_rsa" not in result.plain_text
    assert result.plain_text == (
        f"Cannot list d: {project}/d changed while the call ran (a symlink appeared on the "
        f"way: {project}/d); nothing was listed."
    )


@pytest.mark.parametrize(
    ("tool", "args"),
    [(GREP_TOOL, {"pattern": "secret|meeting"}), (FIND_TOOL, {"pattern": "*"})],
)
async def test_ripgrep_starts_in_the_checked_folder_or_fails(
    tmp_path: Path, tool: ToolSpec, args: dict[str, str]
) -> None:
    # ripgrep enters the folder by the walk's descriptor (/proc/self/fd/N): a symlink swapped
    # in on the way after the tool resolved it is not followed (the Python search walks by path)
    if ripgrep_path() is None:
        pytest.skip("no rg")
    project, secrets = _project(tmp_path, "ssh")
    (secrets / "id_rsa").write_text(SECRET)
    tools = ToolContext(
        cwd=project, before_read=_swap_in_link(project, secrets), search_backend="ripgrep"
    )
    result = await tool.execute({**args, "path": "d"}, tools)
    assert result.is_error and "secret" not in result.plain_text
    assert "id_rsa" not in result.plain_text
    assert result.plain_text == (
        f"Cannot search d: {project}/d changed while the call ran (a symlink appeared on the "
        f"way: {project}/d); nothing was searched."
    )


async def test_an_image_read_through_a_swapped_folder_reads_nothing(tmp_path: Path) -> None:
    project, secrets = _project(tmp_path, "ssh")
    _picture(project / "d" / "pic.png", (4, 4))
    _picture(secrets / "pic.png", (8, 8))
    tools = ToolContext(cwd=project, before_read=_swap_in_link(project, secrets))
    result = await READ_TOOL.execute({"path": "d/pic.png"}, tools)
    assert result.is_error and [b["type"] for b in result.content or []] == ["text"]  # no image
    assert "nothing was read" in result.plain_text


@pytest.mark.parametrize("protected", ["ssh", "denied"])
async def test_a_read_that_leads_elsewhere_than_approved_fails(
    tmp_path: Path, protected: str
) -> None:
    project, secrets = _project(tmp_path, protected)
    checked = _checked(project, "read", "d/notes.txt")
    assert checked == real_path(project / "d" / "notes.txt")
    swap_folder(project, secrets)  # after the decision, before the tool runs
    result = await READ_TOOL.execute(
        {"path": "d/notes.txt"}, ToolContext(cwd=project, checked_target=checked)
    )
    assert result.is_error
    assert result.plain_text == (
        "Cannot read d/notes.txt: its path changed while the call ran (a symlink appeared on "
        f"the way); nothing was read. It was approved as {checked} and now leads to "
        f"{secrets / 'notes.txt'}."
    )
    assert result.details == {
        "reason": "path_changed",
        "checked": checked,
        "now": str(secrets / "notes.txt"),
    }


async def test_symlinks_that_are_part_of_the_project_keep_working(tmp_path: Path) -> None:
    project, _secrets = _project(tmp_path, "denied")
    (project / "link.txt").symlink_to("d/notes.txt")  # a file link inside the project
    (project / "docs").symlink_to("d")  # a folder link inside the project
    for path in ("link.txt", "docs/notes.txt", "d/notes.txt"):
        tools = ToolContext(cwd=project, checked_target=_checked(project, "read", path))
        result = await READ_TOOL.execute({"path": path}, tools)
        assert not result.is_error, result.plain_text
        assert result.plain_text == NOTES.rstrip("\n")
    for tool, args in (
        (GREP_TOOL, {"pattern": "meeting", "path": "docs"}),
        (FIND_TOOL, {"pattern": "*.txt", "path": "docs"}),
        (LS_TOOL, {"path": "docs"}),
    ):
        checked = _checked(project, tool.name, "docs")
        result = await tool.execute(args, ToolContext(cwd=project, checked_target=checked))
        assert not result.is_error, result.plain_text
        assert "notes.txt" in result.plain_text


@pytest.mark.parametrize(
    ("tool", "args", "verb"),
    [
        (GREP_TOOL, {"pattern": "secret|meeting"}, "search"),
        (FIND_TOOL, {"pattern": "*.txt"}, "search"),
        (LS_TOOL, {}, "list"),
    ],
)
async def test_a_search_or_listing_that_leads_elsewhere_than_approved_fails(
    tmp_path: Path, tool: ToolSpec, args: dict[str, str], verb: str
) -> None:
    project, secrets = _project(tmp_path, "ssh")
    checked = _checked(project, tool.name, "d")
    swap_folder(project, secrets)
    context = ToolContext(cwd=project, checked_target=checked, search_backend="python")
    result = await tool.execute({**args, "path": "d"}, context)
    assert result.is_error
    assert result.plain_text.startswith(
        f"Cannot {verb} d: its path changed while the call ran (a symlink appeared on the way)"
    )
    assert f"It was approved as {checked} and now leads to {secrets}." in result.plain_text


def test_open_exact_refuses_a_symlink_on_the_way_and_at_the_name(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_text("here")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_text("there")
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    os.symlink(tmp_path / "elsewhere" / "f", tmp_path / "real" / "g")
    for path in (tmp_path / "link" / "f", tmp_path / "real" / "g"):
        with pytest.raises(TargetChanged, match="a symlink appeared on the way"):
            open_exact(str(path))
    fd = open_exact(str(tmp_path / "real" / "f"))
    try:
        assert os.pread(fd, 10, 0) == b"here"
    finally:
        os.close(fd)
    with pytest.raises(FileNotFoundError):
        open_exact(str(tmp_path / "real" / "missing"))
    seen: list[int] = []
    with pytest.raises(ValueError, match="not a regular"):  # refused before it is opened

        def refuse(info: os.stat_result) -> None:
            seen.append(info.st_size)
            raise ValueError("not a regular file")

        open_exact(str(tmp_path / "real" / "f"), check=refuse)
    assert seen == [4]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
async def test_a_process_swapping_a_folder_and_a_symlink_never_gets_a_read_through(
    tmp_path: Path,
) -> None:
    project, secrets = _project(tmp_path, "ssh")
    os.symlink(secrets, project / "s")

    async def attempt(number: int) -> str | None:
        # the approval's decision: resolved once; the credentials folder would ask
        try:
            real = _checked(project, "read", "d/notes.txt")
        except OSError:  # the swap hit the resolution: the hook raises, the call is blocked
            return None
        if real.startswith(str(secrets)):
            return None
        tools = ToolContext(cwd=project, checked_target=real)
        result = await READ_TOOL.execute({"path": "d/notes.txt"}, tools)
        assert "secret" not in result.plain_text, f"read through at {number}"
        return result.details.get("reason", "error" if result.is_error else "ok")

    with swapping(project / "d", project / "s"):
        await race(attempt)
