"""``/add-dir`` (coding_agent.tui.commands.working_dirs) over the worker's ``WorkingDirsService``
(coding_agent.worker.working_dirs).

Through a real worker process: a folder added with ``/add-dir DIR`` is stored with the session's
launch settings, so after the worker is SIGKILLed a new worker of the session still counts it (a
read there does not ask). Through chord's loopback source, as a TUI process reaches the worker
(errors cross as on the wire): ``--remember`` appends to your own ``config.toml`` keeping its
comments byte for byte (and writes nothing when the folder is there), ``/add-dir`` alone lists
the working directories with where each comes from, and each bad input is one line that
writes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import Client, connected, deny, text_of, worker_process, write_script

from chord import BACKGROUND, FacetEnvironment, create_facet_host, define_facet
from chord.remote import LoopbackServiceSource
from chord.textual import Arguments, CommandError
from coding_agent.contracts import WorkingDirsService
from coding_agent.session_files.folders import Session, load_session
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.tui.commands.working_dirs import WorkingDirsTarget, add_dir
from coding_agent.worker.working_dirs import (
    WorkingDirectories,
    session_keeper,
    working_dirs_facet,
)
from facets_approval.workdirs import read_outside, working_directories

pytestmark = pytest.mark.anyio


def typed(text: str) -> Arguments:
    """What the command line hands ``/add-dir`` for ``/add-dir TEXT``."""
    return Arguments(text, {"dir": text})


def service_facet(found: list[Any]) -> Any:
    """A TUI-side facet handing over the worker's ``WorkingDirsService``."""

    def setup(env: FacetEnvironment) -> None:
        found.append(env.use(WorkingDirsService))

    return define_facet("test/tui", setup)


# -- through the real worker ------------------------------------------------------------------
@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {**agent_env, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


async def test_an_added_folder_survives_a_killed_worker(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    notes = tmp_path / "home" / "notes"
    notes.mkdir(parents=True)
    (notes / "todo.md").write_text("buy milk\n")
    read = {"toolCalls": [{"name": "read", "arguments": {"path": str(notes / "todo.md")}}]}
    script = write_script(tmp_path / "script.json", [read, {"text": "done"}])
    found: list[Any] = []
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(Client(), worker.socket, service_facet(found)),
    ):
        outcome = str(await add_dir(WorkingDirsTarget(found[0]), typed("~/notes"), BACKGROUND))
        assert f"Added {notes} as a working directory, kept with this session" in outcome
        assert load_session(session.path).settings.add_dirs == (str(notes),)  # on disk already
        await worker.kill()  # SIGKILL: only what was written survives

    client = Client(approve=deny)  # a dialog now would be denied (and recorded)
    found.clear()
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket, service_facet(found)),
    ):
        await client.root.send({"content": "read my notes"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert client.approvals == []  # the read outside the project did not ask
        results = [text_of(entry) for entry in client.entries("pi.tool_result")]
        assert "buy milk" in results[-1]
        listed = str(await add_dir(WorkingDirsTarget(found[0]), typed(""), BACKGROUND))
        assert f"{notes}  from this session" in listed
        again = str(await add_dir(WorkingDirsTarget(found[0]), typed(str(notes)), BACKGROUND))
        assert "already a working directory (from this session): nothing written" in again
    assert load_session(session.path).settings.add_dirs == (str(notes),)


# -- through the loopback ---------------------------------------------------------------------
@asynccontextmanager
async def loopback(
    dirs: WorkingDirectories, project: Path, env: dict[str, str], keep: Any
) -> AsyncIterator[Any]:
    found: list[Any] = []
    async with (
        anyio.create_task_group() as group,
        create_facet_host([working_dirs_facet(dirs, project, env, keep)]) as worker,
        create_facet_host(
            [service_facet(found)],
            service_sources=[LoopbackServiceSource(worker.services, task_group=group)],
        ),
    ):
        yield found[0]
        group.cancel_scope.cancel()


USER_CONFIG = """\
# my settings: keep this comment
model = "faux/faux-1"   # trailing comment too

[permissions]
allow = ["Bash(ls:*)"]  # listing is fine
"""


async def test_remember_appends_to_your_config_toml_keeping_its_comments(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    project, docs = session.cwd, tmp_path / "srv" / "docs"
    docs.mkdir(parents=True)
    config = tmp_path / "cfg" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(USER_CONFIG)
    files = PermissionFiles(project, env)
    dirs = WorkingDirectories([], [], files)
    target = {"path": str(docs / "index.md")}
    async with loopback(dirs, project, env, session_keeper(session, None)) as service:
        seen = working_directories(str(project), {"working_directories": dirs})
        assert read_outside("read", target, seen, env["HOME"]) is not None  # asks, before
        outcome = str(
            await add_dir(WorkingDirsTarget(service), typed(f"--remember {docs}"), BACKGROUND)
        )
        assert f"Added {docs} as a working directory of every session" in outcome
        assert str(config) in outcome
        text = config.read_text()
        assert text.startswith(USER_CONFIG)  # every byte the user wrote is kept
        assert f'additional_directories = ["{docs}"]' in text
        seen = working_directories(str(project), {"working_directories": dirs})
        assert read_outside("read", target, seen, env["HOME"]) is None  # free, at once
        # already there: says so, writes nothing
        before = config.stat().st_mtime_ns, text
        again = str(
            await add_dir(WorkingDirsTarget(service), typed(f"--remember {docs}"), BACKGROUND)
        )
        assert f"{docs} is already a working directory of every session" in again
        assert "nothing written" in again
        assert (config.stat().st_mtime_ns, config.read_text()) == before
        # the plain form says it counts already, and stores nothing with the session
        plain = str(await add_dir(WorkingDirsTarget(service), typed(str(docs)), BACKGROUND))
        assert f"already a working directory (from {config})" in plain
    assert load_session(session.path).settings.add_dirs == ()
    assert not (project / ".coding-agent").exists()  # never a project file


async def test_add_dir_alone_lists_the_folders_and_where_each_comes_from(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    project = session.cwd
    mine, theirs, claude = (tmp_path / name for name in ("mine", "theirs", "claudes"))
    for folder in (mine, theirs, claude):
        folder.mkdir()
    config = tmp_path / "cfg" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[permissions]\nadditional_directories = ["{theirs}", "{mine}"]\n')
    claude_settings = Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    claude_settings.parent.mkdir(parents=True, exist_ok=True)
    claude_settings.write_text(f'{{"permissions": {{"additionalDirectories": ["{claude}"]}}}}')
    dirs = WorkingDirectories([str(mine)], [], PermissionFiles(project, env))
    async with loopback(dirs, project, env, session_keeper(session, None)) as service:
        listed = str(await add_dir(WorkingDirsTarget(service), typed(""), BACKGROUND)).splitlines()
    assert listed[0].startswith("Working directories")
    assert [line.split()[0] for line in listed[1:]] == [
        str(project),
        *map(str, (mine, theirs, claude)),
    ]
    assert listed[1].endswith("from the project")
    assert listed[2].endswith(f"from this session (--add-dir or /add-dir); also {config}")
    assert listed[3].endswith(f"from {config}")
    assert listed[4].endswith(f"from {claude_settings}")


async def test_each_bad_input_is_one_line_and_writes_nothing(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    project = session.cwd
    (project / "src").mkdir()
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "file.txt").write_text("x")
    dirs = WorkingDirectories([], [], PermissionFiles(project, env))
    config = tmp_path / "cfg" / "coding-agent" / "config.toml"
    before = session.metadata_path.read_bytes()
    bad = {
        "../nope": rf"no such folder: \.\./nope \({tmp_path / 'nope'}\)",
        "~/file.txt": rf"~/file\.txt is a file, not a folder \({tmp_path / 'home' / 'file.txt'}\)",
        ".": rf"{project} is the project folder: already a working directory",
        "src": rf"{project / 'src'} is inside the project {project}: already a working",
        "--remember ./src": rf"{project / 'src'} is inside the project",
        "--remember": r"give a folder: /add-dir DIR",
    }
    async with loopback(dirs, project, env, session_keeper(session, None)) as service:
        for text, error in bad.items():
            with pytest.raises(CommandError, match=rf"^/add-dir: {error}") as raised:
                await add_dir(WorkingDirsTarget(service), typed(text), BACKGROUND)
            assert "\n" not in str(raised.value)
        assert session.metadata_path.read_bytes() == before  # nothing written
        assert dirs.session_folders() == []
        # a relative path is resolved against the project, and the line says what it became
        outcome = str(await add_dir(WorkingDirsTarget(service), typed("../sibling"), BACKGROUND))
        assert f"Added {sibling} (../sibling from the project {project})" in outcome
    assert dirs.session_folders() == [str(sibling)]
    assert load_session(session.path).settings.add_dirs == (str(sibling),)
    assert not config.exists()


async def test_remember_leaves_a_broken_config_toml_as_it_is(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    config = tmp_path / "cfg" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[permissions\nallow = [\n")  # a half-saved edit
    dirs = WorkingDirectories([], [], PermissionFiles(session.cwd, env))
    async with loopback(dirs, session.cwd, env, session_keeper(session, None)) as service:
        with pytest.raises(CommandError, match=rf"cannot remember {docs}: {config}: not valid"):
            await add_dir(WorkingDirsTarget(service), typed(f"--remember {docs}"), BACKGROUND)
    assert config.read_text() == "[permissions\nallow = [\n"
