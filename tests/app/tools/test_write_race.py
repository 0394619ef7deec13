"""``write``/``edit`` land exactly where the path resolved, never through a symlink swapped in
since (docs/design/agent.md#write): a folder on the way replaced by ``s -> .git`` (or a link out of
the project) between the approval's check and the write fails the call and writes nothing.

Real files and real symlinks: the swap happens in the tool's ``before_write`` hook (the last
point before the bytes move), or by a process exchanging the two names in a loop.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from coding_agent.worker.tools import EDIT_TOOL, WRITE_TOOL, ToolContext
from coding_agent.worker.tools.exact import TargetChanged, remove_exact, write_exact
from coding_agent.worker.tools.host import CheckedTargets
from facets_approval.guarded import leave_checked
from facets_approval.session import confinement, edit_target
from tests.app.tools._race import race, real_path, swap_folder, swapping

GUARDED = [{"pattern": ".git/", "reason": "git runs what .git/config names"}]
ORIGINAL = "[core]\n\tbare = false\n"


def _project(tmp_path: Path, protected: str) -> tuple[Path, Path]:
    """A project with ``d/config`` (same text as the protected file) and the protected folder:
    its ``.git`` or a folder outside it (a stand-in for ``$HOME``)."""
    project = tmp_path / "project"
    (project / "d").mkdir(parents=True)
    (project / "d" / "config").write_text(ORIGINAL)
    target = project / ".git" if protected == "git" else tmp_path / "home"
    target.mkdir()
    (target / "config").write_text(ORIGINAL)
    return project, target


def _swap_in_link(project: Path, target: Path) -> Callable[[Path, bytes], Awaitable[None]]:
    """A ``before_write`` that replaces the folder ``d`` by a symlink to ``target``."""

    async def before_write(path: Path, data: bytes) -> None:
        del path, data
        swap_folder(project, target)

    return before_write


def _assert_nothing_written(result_text: str, target: Path) -> None:
    assert "changed while the call ran (a symlink appeared on the way" in result_text
    assert "nothing was written" in result_text
    assert (target / "config").read_text() == ORIGINAL
    assert sorted(p.name for p in target.iterdir()) == ["config"]  # no temporary left either


@pytest.mark.anyio
@pytest.mark.parametrize("protected", ["git", "outside"])
async def test_a_write_whose_folder_becomes_a_symlink_writes_nothing_through_it(
    tmp_path: Path, protected: str
) -> None:
    project, target = _project(tmp_path, protected)
    tools = ToolContext(cwd=project, before_write=_swap_in_link(project, target))
    result = await WRITE_TOOL.execute(
        {"path": "d/config", "content": "[core]\n\tfsmonitor = x\n"}, tools
    )
    assert result.is_error
    assert result.plain_text.startswith("Cannot write d/config: ")
    _assert_nothing_written(result.plain_text, target)
    assert (project / "d.away" / "config").read_text() == ORIGINAL


@pytest.mark.anyio
@pytest.mark.parametrize("protected", ["git", "outside"])
async def test_an_edit_whose_folder_becomes_a_symlink_writes_nothing_through_it(
    tmp_path: Path, protected: str
) -> None:
    project, target = _project(tmp_path, protected)
    tools = ToolContext(cwd=project, before_write=_swap_in_link(project, target))
    edits = [{"oldText": "bare = false", "newText": "fsmonitor = x"}]
    result = await EDIT_TOOL.execute({"path": "d/config", "edits": edits}, tools)
    assert result.is_error
    _assert_nothing_written(result.plain_text, target)


@pytest.mark.anyio
async def test_a_target_that_leads_elsewhere_than_approved_fails(tmp_path: Path) -> None:
    project, target = _project(tmp_path, "git")
    checked = edit_target({"path": "d/config"}, str(project))
    assert checked == real_path(project / "d" / "config")
    assert confinement({"path": "d/config"}, str(project), GUARDED, real=checked) is None
    swap_folder(project, target)  # after the decision
    tools = ToolContext(cwd=project, checked_target=checked)
    for call in (
        WRITE_TOOL.execute({"path": "d/config", "content": "planted"}, tools),
        EDIT_TOOL.execute(
            {"path": "d/config", "edits": [{"oldText": "false", "newText": "true"}]}, tools
        ),
    ):
        result = await call
        assert result.is_error
        assert "its path changed while the call ran (a symlink appeared on the way)" in (
            result.plain_text
        )
        assert f"approved as {checked}" in result.plain_text
        assert result.details["reason"] == "path_changed"
    assert (target / "config").read_text() == ORIGINAL


@pytest.mark.anyio
async def test_an_unchanged_approved_target_is_written(tmp_path: Path) -> None:
    project, _target = _project(tmp_path, "git")
    os.chmod(project / "d" / "config", 0o640)
    checked = edit_target({"path": "d/config"}, str(project))
    tools = ToolContext(cwd=project, checked_target=checked)
    result = await WRITE_TOOL.execute({"path": "d/config", "content": "new"}, tools)
    assert not result.is_error, result.plain_text
    assert (project / "d" / "config").read_text() == "new"
    assert (project / "d" / "config").stat().st_mode & 0o777 == 0o640  # its mode is kept


def test_write_exact_refuses_a_symlink_on_the_way_and_at_the_name(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    with pytest.raises(TargetChanged, match="a symlink appeared on the way"):
        write_exact(str(tmp_path / "link" / "f"), b"x", create_folders=True)
    os.symlink(tmp_path / "elsewhere" / "g", tmp_path / "real" / "g")
    with pytest.raises(TargetChanged):
        write_exact(str(tmp_path / "real" / "g"), b"x")
    with pytest.raises(TargetChanged):
        remove_exact(str(tmp_path / "link" / "g"))
    assert list((tmp_path / "elsewhere").iterdir()) == []
    write_exact(str(tmp_path / "real" / "new" / "deeper" / "f"), b"made", create_folders=True)
    assert (tmp_path / "real" / "new" / "deeper" / "f").read_bytes() == b"made"
    remove_exact(str(tmp_path / "real" / "new" / "deeper" / "f"))
    assert not (tmp_path / "real" / "new" / "deeper" / "f").exists()


def test_the_checked_target_is_left_for_the_call_and_taken_back_on_a_block() -> None:
    targets = CheckedTargets(limit=2)
    services = {"checked_targets": targets}
    take_back = leave_checked(services, "1:a", "/p/d/config")
    assert targets == {"1:a": "/p/d/config"}
    take_back()
    assert targets == {}
    leave_checked(services, "1:a", "/p/a")
    leave_checked(services, "1:b", "/p/b")
    leave_checked(services, "1:c", "/p/c")
    assert list(targets) == ["1:b", "1:c"]  # bounded: the oldest goes


@pytest.mark.anyio
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
async def test_a_process_swapping_a_folder_and_a_symlink_never_gets_a_write_through(
    tmp_path: Path,
) -> None:
    project, target = _project(tmp_path, "git")
    os.symlink(".git", project / "s")

    async def attempt(number: int) -> str | None:
        # the approval's decision: resolved once; a guarded target would ask (skipped here)
        try:
            real = edit_target({"path": "d/config"}, str(project))
        except OSError:  # the swap hit the resolution: the hook raises, the call is blocked
            return None
        if confinement({"path": "d/config"}, str(project), GUARDED, real=real) is not None:
            return None
        tools = ToolContext(cwd=project, checked_target=real)
        content = f"[core]\n\tfsmonitor = planted-{number}\n"
        result = await WRITE_TOOL.execute({"path": "d/config", "content": content}, tools)
        assert (target / "config").read_text() == ORIGINAL, f"written through at {number}"
        return result.details.get("reason", "error" if result.is_error else "ok")

    with swapping(project / "d", project / "s"):
        await race(attempt)
    assert (target / "config").read_text() == ORIGINAL
