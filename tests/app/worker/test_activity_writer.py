"""The activity record is written off the event loop for a prompt and at once for everything
else (coding_agent.worker.activity.ActivityWriter): whatever the order of records, writes and
settles, the file names the newest record made, with the branch it should name."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.session_files.folders import Session, create_session
from coding_agent.worker.activity import ActivityWriter


def _session(tmp: Path) -> Session:
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    return create_session(project, env={"XDG_STATE_HOME": str(tmp / "state"), "HOME": str(tmp)})


def _recorded(session: Session) -> tuple[datetime | None, int | None]:
    raw = session._activity()  # pyright: ignore[reportPrivateUsage]
    at = raw.get("at")
    return (datetime.fromisoformat(at) if isinstance(at, str) else None), session.current_branch()


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("prompt"), st.one_of(st.none(), st.integers(1, 5))),
        st.tuples(st.just("now"), st.one_of(st.none(), st.integers(1, 5))),
        st.tuples(st.just("yield"), st.none()),  # the writing task may run
        st.tuples(st.just("settle"), st.none()),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(_steps)
def test_the_file_ends_with_the_newest_record_made_and_its_branch(
    tmp_path_factory: Any, steps: list[tuple[str, int | None]]
) -> None:
    session = _session(tmp_path_factory.mktemp("activity"))

    async def main() -> None:
        writer = ActivityWriter(session, fsync=False)
        branch: int | None = None  # what the newest record should name
        last: datetime | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(writer.run)
            await anyio.wait_all_tasks_blocked()
            made = False
            for action, given_branch in steps:
                if action in ("prompt", "now"):
                    before = datetime.now().astimezone()
                    writer.record(given_branch, later=action == "prompt")
                    made = True
                    branch = given_branch if given_branch is not None else branch
                    if action == "now":  # written when record returns
                        at, named = _recorded(session)
                        assert at is not None and at >= before
                        assert named == branch
                elif action == "yield":
                    await anyio.wait_all_tasks_blocked()
                else:
                    await writer.settle()
            await writer.settle()
            at, named = _recorded(session)
            assert (at is not None) == made
            assert named == branch
            last = at
            group.cancel_scope.cancel()
        assert _recorded(session) == (last, branch)  # nothing older came after

    anyio.run(main)


@pytest.mark.anyio
async def test_a_prompts_record_is_written_by_the_task_and_settled_at_close(
    tmp_path: Path,
) -> None:
    session = _session(tmp_path)
    writer = ActivityWriter(session, fsync=False)
    async with anyio.create_task_group() as group:
        group.start_soon(writer.run)
        await anyio.wait_all_tasks_blocked()
        writer.record(3, later=True)
        assert not session.activity_path.exists()  # not on the loop
        await writer.settle()
        assert session.current_branch() == 3
        writer.record(4, later=True)
        group.cancel_scope.cancel()  # the host closes with a record pending
    assert session.current_branch() == 4


@pytest.mark.anyio
async def test_without_the_task_every_record_is_written_at_once(tmp_path: Path) -> None:
    session = _session(tmp_path)
    writer = ActivityWriter(session, fsync=False)
    writer.record(7, later=True)
    assert session.current_branch() == 7
    writer.record(None, later=True)
    assert session.current_branch() == 7


@pytest.mark.anyio
async def test_prompts_records_made_within_the_spacing_are_written_once_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a write the task leaves ``spacing`` before the next: the prompts made meanwhile
    cost one write, of the newest, and the host's close writes it at once."""
    from coding_agent.session_files.folders import record_activity as real

    written: list[int | None] = []

    def counted(session: Session, when: Any = None, **kw: Any) -> None:
        written.append(kw.get("branch"))
        real(session, when, **kw)

    monkeypatch.setattr("coding_agent.worker.activity.record_activity", counted)
    session = _session(tmp_path)
    writer = ActivityWriter(session, fsync=False, spacing=3600)  # never over in this test
    async with anyio.create_task_group() as group:
        group.start_soon(writer.run)
        await anyio.wait_all_tasks_blocked()
        writer.record(1, later=True)
        await writer.settle()
        await anyio.wait_all_tasks_blocked()  # the task wrote, and now leaves the spacing
        writer.record(2, later=True)
        await anyio.wait_all_tasks_blocked()
        assert session.current_branch() == 1  # 2 waits for the spacing
        writer.record(3, later=True)  # supersedes 2
        group.cancel_scope.cancel()  # the host closes
    assert session.current_branch() == 3
    assert written == [1, 3]
