"""Background commands as durable jobs: ``bash {background: true}``, ``job_output``, ``job_kill``.

The tools run in a real pico3 harness (the ``tools_facet`` declarations, a faux model that
makes the calls, ``pi.job`` tasks) over a real :class:`~pico3.process_host.LocalProcessHost`:
the commands are real processes. A command that must still be running when the test looks
waits for a *gate* file the test creates, so nothing depends on timing.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import pytest

from chord.context import BACKGROUND
from coding_agent.tui.widgets.tasks import task_summary
from coding_agent.worker.job_control import HarnessJobs, job_key
from coding_agent.worker.tools import JOB_OUTPUT_TOOL, ToolContext, builtin_tools
from coding_agent.worker.tools.bash import BASH_TOOL
from coding_agent.worker.tools_facet import READ_ONLY_TOOLS, tool_declaration
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.models import FauxProvider, FauxResponse, FauxState, Request, ToolResultMessage
from pico3.models.faux import FauxStep, faux_response, faux_tool_call
from pico3.process_host import LocalProcessHost
from pico3.storage import MemoryStorage
from pico3.storage.records import Entry
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}
TIMEOUT = 30.0


@dataclass
class Agent:
    harness: Harness
    root: ConversationHandle
    host: LocalProcessHost
    cwd: Path

    async def turn(self, prompt: str) -> None:
        await self.root.send(prompt, BACKGROUND)
        with anyio.fail_after(TIMEOUT):
            await self.root.wait_for_idle(BACKGROUND)

    async def results(self) -> list[tuple[str, str, bool, dict[str, Any]]]:
        """``(tool name, text, is error, details)`` of every tool result, oldest first."""
        out: list[tuple[str, str, bool, dict[str, Any]]] = []
        for entry in reversed(await self.root.entries(BACKGROUND, limit=1000)):
            if entry.kind == "pi.tool_result":
                message = first_message(entry)
                text = "".join(b.get("text", "") for b in message["content"])
                details = (entry.data or {}).get("details") or {}
                out.append((message["toolName"], text, message["isError"], details))
        return out

    async def notices(self) -> list[Entry]:
        entries = await self.root.entries(BACKGROUND, limit=1000, kind="pi.notice")
        return list(reversed(entries))

    async def job_done(self, job_id: int) -> Any:
        with anyio.fail_after(TIMEOUT):
            return await self.harness.wait_for_task(job_id, BACKGROUND)


def first_message(entry: Entry) -> dict[str, Any]:
    assert isinstance(entry.model, list) and entry.model
    return entry.model[0]


@asynccontextmanager
async def open_agent(tmp_path: Path, script: list[FauxStep]) -> AsyncIterator[Agent]:
    cwd = tmp_path / "project"
    cwd.mkdir(parents=True)
    host = LocalProcessHost(tmp_path / "processes")
    services = {"models": Models([FauxProvider(script)]), "process_host": host}
    # the job tools alone, no approval feature: the approval gate is off for this harness
    options = HarnessOptions(services=services, require_approval=False)
    harness = await Harness.open(MemoryStorage(), options, BACKGROUND)
    try:
        async with harness:
            for spec in builtin_tools():
                harness.register_tool(
                    tool_declaration(spec, cwd, jobs=lambda api: HarnessJobs(api, harness))
                )
            root = await harness.root(BACKGROUND)
            await root.set_config(
                {"model": MODEL, "selectedTools": harness.tools.names()}, BACKGROUND
            )
            await harness.resume(BACKGROUND)
            yield Agent(harness, root, host, cwd)
    finally:
        with anyio.CancelScope(shield=True):  # leave no process behind, whatever happened
            for record in host.state_dir.iterdir():
                if record.is_dir():
                    await host.kill(unquote(record.name), "SIGKILL", BACKGROUND)
        host.close()


def _started_job(request: Request) -> int:
    for message in reversed(request.messages):
        if isinstance(message, ToolResultMessage):
            text = "".join(getattr(block, "text", "") for block in message.content)
            found = re.search(r"Started background job (\d+)", text)
            if found is not None:
                return int(found.group(1))
    raise AssertionError("no job was started in this conversation")


def with_job_id(make: Callable[[int], FauxResponse]) -> FauxStep:
    """A step that answers with ``make(id)`` of the job started last in the conversation."""

    def step(request: Request, _state: FauxState) -> FauxResponse:
        return make(_started_job(request))

    return step


def background(command: str) -> FauxResponse:
    return faux_response(faux_tool_call("bash", {"command": command, "background": True}))


def call(name: str, arguments: dict[str, Any]) -> FauxResponse:
    return faux_response(faux_tool_call(name, arguments))


def gated(gate: Path, before: str, after: str) -> str:
    return f"{before}; while [ ! -e {gate} ]; do sleep 0.02; done; {after}"


async def test_a_background_command_returns_at_once_and_its_job_runs_to_the_end(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    command = gated(gate, "echo started; echo warning >&2", "echo finished")
    script: list[FauxStep] = [
        background(command),
        faux_response("It runs."),
        with_job_id(lambda job: call("job_output", {"id": job})),
        faux_response("Done."),
    ]
    async with open_agent(tmp_path, script) as agent:
        await agent.turn("start the server")  # returns while the command waits for the gate
        ((name, text, is_error, details),) = await agent.results()
        assert (name, is_error) == ("bash", False)
        job_id = details["job_id"]
        assert text.startswith(f"Started background job {job_id}: {command}")
        assert details["background"] is True and details["state"] == "starting"
        record = agent.host.state_dir / f"{job_id}%3A1"
        assert details["stdout_path"] == str(record / "stdout")
        assert details["stderr_path"] == str(record / "stderr")
        assert job_key(job_id) == f"{job_id}:1"
        task = await agent.harness.get_task(job_id, BACKGROUND)
        assert task is not None and task.kind == "pi.job" and task.status != "terminal"
        assert task.background is True  # a conversation abort leaves it running
        assert task.conversation_id == agent.root.id
        watch = await agent.root.watch(BACKGROUND)  # the tasks panel shows view.tasks
        watch.stop()
        shown = watch.view["tasks"][str(job_id)]
        assert shown["kind"] == "pi.job" and shown["background"] is True
        assert shown["status"]["stage"] in ("starting", "spawning", "running")
        assert task_summary(shown["status"]).startswith(shown["status"]["stage"])

        gate.touch()
        done = await agent.job_done(job_id)
        assert done.outcome["status"] == "completed"
        assert done.outcome["result"]["exitCode"] == 0
        assert (record / "stdout").read_text() == "started\nfinished\n"
        assert (record / "stderr").read_text() == "warning\n"
        (notice,) = await agent.notices()  # the model learns that it ended
        assert "exited with code 0" in first_message(notice)["content"]

        await agent.turn("how did it go?")
        name, text, is_error, details = (await agent.results())[-1]
        assert (name, is_error) == ("job_output", False)
        assert text.splitlines()[0] == f"Job {job_id} (exited with code 0): {command}"
        assert "started\nfinished" in text and "[stderr]\nwarning" in text
        assert details["state"] == "exited" and details["exit_code"] == 0


async def test_job_output_shows_a_running_job_and_job_kill_stops_it(tmp_path: Path) -> None:
    gate = tmp_path / "never"
    script: list[FauxStep] = [
        background(gated(gate, "echo up", "touch unreachable")),
        with_job_id(lambda job: call("job_output", {"id": job})),
        faux_response("Running."),
        faux_response(faux_tool_call("job_output", {})),
        faux_response("Listed."),
        with_job_id(lambda job: call("job_kill", {"id": job})),
        faux_response("Stopped."),
        with_job_id(lambda job: call("job_kill", {"id": job})),
        faux_response("Already stopped."),
    ]
    async with open_agent(tmp_path, script) as agent:
        await agent.turn("start it and look")
        started, output = await agent.results()
        job_id = started[3]["job_id"]
        assert output[0] == "job_output" and not output[2]
        assert output[1].startswith(f"Job {job_id} (running): ")
        assert output[3]["state"] == "running"

        await agent.turn("which jobs are there?")
        name, text, is_error, details = (await agent.results())[-1]
        assert (name, is_error) == ("job_output", False)
        assert text.startswith(f"Job {job_id} (running): ")
        assert [job["job_id"] for job in details["jobs"]] == [job_id]

        await agent.turn("stop it")
        killed = (await agent.results())[-1]
        assert killed[0] == "job_kill" and not killed[2], killed[1]
        assert killed[1].startswith(f"Stopped job {job_id}.\nJob {job_id} (killed): ")
        done = await agent.job_done(job_id)
        assert done.outcome == {"status": "aborted", "result": {"killed": True}}
        status = await agent.host.status(job_key(job_id), BACKGROUND)
        assert status.state == "exited" and status.exit_code is not None
        assert status.exit_code < 0  # ended by a signal, not by the gate
        assert not (agent.cwd / "unreachable").exists()

        await agent.turn("stop it again")  # the second kill's step reads the first result
        name, text, is_error, details = (await agent.results())[-1]
        assert (name, is_error) == ("job_kill", False)
        assert text == f"Job {job_id} had already ended (killed); nothing to stop."
        assert details["already_ended"] is True


def _second_start(request: Request, _state: FauxState) -> FauxResponse:
    return background("exit 3")


async def test_job_tools_report_unknown_ids_failed_commands_and_empty_lists(
    tmp_path: Path,
) -> None:
    script: list[FauxStep] = [
        call("job_output", {}),
        call("job_output", {"id": 999}),
        call("job_kill", {"id": 1}),  # the root conversation's id space: no job has id 1
        _second_start,
        faux_response("Tried."),
    ]
    async with open_agent(tmp_path, script) as agent:
        await agent.turn("look")
        listing, unknown, not_a_job, started = await agent.results()
        assert listing[1:3] == ("No background jobs in this conversation.", False)
        assert unknown[1:3] == ("No background job 999 in this conversation.", True)
        assert not_a_job[1:3] == ("No background job 1 in this conversation.", True)
        job_id = started[3]["job_id"]
        done = await agent.job_done(job_id)
        assert done.outcome["result"]["exitCode"] == 3
        (notice,) = await agent.notices()
        assert "exited with code 3" in first_message(notice)["content"]


async def test_background_calls_need_a_job_host(tmp_path: Path) -> None:
    context = ToolContext(cwd=tmp_path)
    result = await BASH_TOOL.execute({"command": "true", "background": True}, context)
    assert result.is_error
    assert (
        result.plain_text == "Background jobs are not available here (this host runs no job host)."
    )
    result = await JOB_OUTPUT_TOOL.execute({}, context)
    assert result.is_error and "not available" in result.plain_text
    result = await JOB_OUTPUT_TOOL.execute({"id": 0}, context)
    assert result.is_error and "arguments.id: " in result.plain_text


def test_job_output_replays_after_a_crash_and_the_others_do_not() -> None:
    assert "job_output" in READ_ONLY_TOOLS  # a read: safe to run again
    assert "job_kill" not in READ_ONLY_TOOLS and "bash" not in READ_ONLY_TOOLS


def test_the_tasks_panel_summarises_a_job_by_its_stage_and_last_output_line() -> None:
    status = {"stage": "running", "stdout": "build\nListening on :3000\n", "stderr": "x\n"}
    assert task_summary(status) == "running · Listening on :3000"
    assert task_summary({"stage": "starting", "stdout": "", "stderr": ""}) == "starting"
