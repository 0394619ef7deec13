"""``/add-dir DIR`` (coding_agent.tui.commands.working_dirs) over the worker's
``WorkingDirsService`` (coding_agent.worker.working_dirs), reached through chord's loopback
source as a TUI process reaches the worker (errors cross as on the wire): the folder joins
the working directories the approval reads at its next decision; a missing one is the
command's error, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from chord import BACKGROUND, FacetEnvironment, create_facet_host, define_facet
from chord.remote import LoopbackServiceSource
from chord.textual import Arguments, CommandError
from coding_agent.contracts import WorkingDirsService
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.tui.commands.working_dirs import add_dir
from coding_agent.worker.working_dirs import WorkingDirectories, working_dirs_facet
from facets_approval.workdirs import read_outside, working_directories

pytestmark = pytest.mark.anyio


async def test_add_dir_adds_a_folder_until_the_worker_stops(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}  # fmt: skip
    project, notes = tmp_path / "project", tmp_path / "home" / "notes"
    project.mkdir()
    notes.mkdir(parents=True)
    dirs = WorkingDirectories([], [], PermissionFiles(project, env))
    found: list[Any] = []

    def tui_side(env_: FacetEnvironment) -> None:
        found.append(env_.use(WorkingDirsService))

    target = {"path": str(notes / "todo.md")}
    async with (
        anyio.create_task_group() as group,
        create_facet_host([working_dirs_facet(dirs, project, env)]) as worker,
        create_facet_host(
            [define_facet("test/tui", tui_side)],
            service_sources=[LoopbackServiceSource(worker.services, task_group=group)],
        ),
    ):
        service = found[0]
        seen = working_directories(str(project), {"working_directories": dirs})
        assert read_outside("read", target, seen, env["HOME"]) is not None  # asks, before
        outcome = await add_dir(service, Arguments("~/notes", {"dir": "~/notes"}), BACKGROUND)
        assert outcome is not None and f"Added {notes} as a working directory" in str(outcome)
        seen = working_directories(str(project), {"working_directories": dirs})
        assert read_outside("read", target, seen, env["HOME"]) is None  # free, after
        with pytest.raises(CommandError, match=r"/add-dir: no such folder: \.\./nope"):
            await add_dir(service, Arguments("../nope", {"dir": "../nope"}), BACKGROUND)
        group.cancel_scope.cancel()
    assert dirs["added"] == [str(notes)]
