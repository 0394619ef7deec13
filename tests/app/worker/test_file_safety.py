"""The tools' guarantees through the real worker process (issue 14 items 7-8 and issue 24).

Read before edit: an ``edit`` of a file the conversation never read is refused with a message
telling the model to read it; the read's stamp is stored in the session (a worker killed with
SIGKILL and started again still knows it), and a change on disk since the read is refused too.

An interrupted command tells the truth: a worker killed while ``bash`` runs leaves the command
running; the restarted worker kills what is left of it (recorded in the session before the
command was let run) before it writes the result, which says the command was interrupted after
it started and may have had partial effects.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from worker_support import (
    Client,
    allow,
    connected,
    deny,
    text_of,
    worker_process,
    write_script,
)

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": name, "arguments": arguments}]}


def edit(old: str, new: str) -> dict[str, Any]:
    return call("edit", path="README.md", edits=[{"oldText": old, "newText": new}])


def results(client: Client) -> list[str]:
    return [text_of(entry) for entry in client.entries("pi.tool_result")]


async def test_read_before_edit_holds_across_a_worker_restart(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    readme = session.cwd / "README.md"
    script = write_script(  # step n answers a transcript with n answers: restarts go on
        tmp_path / "script.json",
        [
            *(edit("42", "43"), call("read", path="README.md"), edit("42", "43"), {"text": "ok"}),
            *(edit("43", "44"), {"text": "done"}, edit("44", "45"), {"text": "done"}),
        ],
    )
    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "change the answer"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        refused, _read, edited = results(client)
        assert refused.startswith("README.md exists but has not been read in this conversation.")
        assert "Read it first with the read tool" in refused
        assert edited == "Successfully replaced 1 block in README.md."
        assert "The answer is 43." in readme.read_text()
        await worker.kill()  # SIGKILL: only what was committed survives
        await client.wait_for(lambda: client.root_closed)

    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        # The edit wrote the file, which counts as read; the stamp came back from storage.
        await client.root.send({"content": "again"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert results(client)[-1] == "Successfully replaced 1 block in README.md."
        assert "The answer is 44." in readme.read_text()

        readme.write_text(readme.read_text() + "Edited by hand.\n")  # changed behind its back
        await client.root.send({"content": "once more"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended(2))
        assert results(client)[-1].startswith("README.md has changed on disk since you last read")
        assert "The answer is 44." in readme.read_text()


def processes_in(folder: Path) -> list[int]:
    """The live processes whose working directory is ``folder``."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/cwd") != str(folder):
                continue
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(name))
    return found


async def test_a_command_interrupted_by_a_worker_kill_is_killed_and_reported_truthfully(
    session: Session, agent_env: dict[str, str], tmp_path: Path, processes: Any
) -> None:
    command = "echo started; sleep 3; echo ran >> f"
    script = write_script(tmp_path / "script.json", [call("bash", command=command), {"text": "ok"}])

    def live_output() -> str:
        turn = client.view.get("turn") or {}
        return "".join(slot.get("output", "") for slot in turn.get("tools", []))

    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "run it"}, BACKGROUND)
        await client.wait_for(lambda: "started" in live_output())  # the command runs
        await worker.kill()  # SIGKILL, about a second into `sleep 3`
        await client.wait_for(lambda: client.root_closed)
    left = processes_in(session.cwd)  # the worker is gone: these are the command's
    assert left, "the command should outlive the killed worker"
    # Freeze what is left while no worker runs, so the outcome does not depend on how fast the
    # new worker starts: only its kill can end these processes now.
    for pid in left:
        os.kill(pid, signal.SIGSTOP)

    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.wait_for(lambda: bool(client.entries("pi.tool_result")))
        (result,) = client.entries("pi.tool_result")
        text = text_of(result)
        assert text.startswith(
            "Command interrupted by a worker restart after it had started: "
            "it may have had partial effects."
        )
        assert "remaining process" in text and "were killed" in text
        assert "not run" not in text
        await processes.ended(left)  # killed before the result was written
        others = [pid for pid in processes_in(session.cwd) if pid != worker.process.pid]
        assert others == []
        # the turn's answer, from the view: the restarted worker resumes the turn by itself,
        # so its turn.ended event may come before this client is subscribed to events
        await client.wait_for(
            lambda: [text_of(e) for e in client.entries("pi.assistant")][-1:] == ["ok"]
        )
    assert not (session.cwd / "f").exists()  # `echo ran >> f` never ran


async def test_accept_edits_confines_writes_to_the_project_in_the_real_worker(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # Issue 24 deliver 3: accept-edits writes in the project without asking; outside it, and
    # the agent's own trust file, ask (here denied): nothing is written there.
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    trust = tmp_path / "config" / "coding-agent" / "trust.json"
    script = write_script(
        tmp_path / "script.json",
        [
            call("write", path="inside.txt", content="in\n"),
            call("write", path="../outside.txt", content="out\n"),
            call("write", path=str(trust), content='{"version": 1, "projects": {}}'),
            {"text": "done"},
        ],
    )
    client = Client(approve=deny)
    args = ("--faux-script", str(script), "--permission-mode", "accept-edits")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "write them"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    assert (session.cwd / "inside.txt").read_text() == "in\n"
    assert not (session.cwd.parent / "outside.txt").exists()
    assert not trust.exists()
    reasons = [dialog.request.get("reason", "") for dialog in client.approvals]
    assert len(reasons) == 2
    assert "outside the project" in reasons[0]
    assert "the agent's trust file" in reasons[1]


async def test_ls_of_a_non_utf8_name_and_old_spill_files_in_the_real_worker(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # Issue 24 item 10: `ls` of a folder holding a name that is not UTF-8 answers (it used to
    # fault the session); spill files past their retention period go when the worker starts.
    (session.cwd / "odd").mkdir()
    os.mkdir(os.fsencode(session.cwd / "odd") + b"/bad\xff.txt")
    spill = session.path / "spill"
    spill.mkdir(exist_ok=True)
    old = spill / "coding-agent-bash-old.log"
    old.write_text("old output")
    os.utime(old, (0, 0))
    script = write_script(tmp_path / "script.json", [call("ls", path="odd"), {"text": "listed"}])
    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        assert not old.exists()
        await client.root.send({"content": "list it"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert results(client) == ["bad\\xff.txt/"]
        assert text_of(client.entries("pi.assistant")[-1]) == "listed"
