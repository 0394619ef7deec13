"""The offline demo (issue 8 item 2): the faux model's tour, driven by a scripted client.

No ``--faux-script`` and no provider key: the worker plays the built-in tour. The client answers
every dialog the way a person at the TUI would (approve, pick an answer), and the tour reads and
lists files, asks a question, writes and edits a file after approval, and runs a command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from worker_support import Client, allow, connected, text_of, worker_process

from chord.context import BACKGROUND, Context
from coding_agent.session_files.folders import Session
from coding_agent.worker.demo import DEMO_NOTES_FILE

pytestmark = pytest.mark.anyio


async def answer_testing(facade: Any, request: dict[str, Any], ctx: Context) -> None:
    assert "Testing" in request["options"]
    await facade.submit({"outcome": "answered", "answer": "Testing", "by": "test"}, BACKGROUND)


async def test_the_faux_demo_tour_runs_to_completion_offline(
    session: Session, agent_env: dict[str, str]
) -> None:
    client = Client(approve=allow, answer=answer_testing)
    async with worker_process(session, agent_env) as worker, connected(client, worker.socket):
        await client.root.send({"content": "Show me what you can do"}, BACKGROUND)
        await client.wait_for(client.turn_ended)

        ended = [e for e in client.events if e["type"] == "turn.ended"]
        assert ended[0]["status"] == "done"
        tools = [e["name"] for e in client.events if e["type"] == "tool.started"]
        assert tools == ["ls", "read", "question", "write", "edit", "bash"]
        results = {e["model"][0]["toolName"]: e for e in client.entries("pi.tool_result")}
        assert all(not e["model"][0]["isError"] for e in results.values()), results
        assert "README.md" in text_of(results["ls"])  # listed the project
        assert "The answer is 42." in text_of(results["read"])  # and read its README
        assert text_of(results["question"]) == "User answered: Testing"
        assert [d.request["name"] for d in client.approvals] == ["write", "edit", "bash"]
        notes = (session.cwd / DEMO_NOTES_FILE).read_text()
        assert notes == "# Notes from the faux demo\n\nTopic: Testing\n"
        assert "faux-demo-notes.md" in text_of(results["bash"])  # the command ran in the project
        summary = text_of(client.entries("pi.assistant")[-1])
        assert summary.startswith("That was the offline demo of the faux model. I listed and read")

        # After the tour, the faux model still answers (it echoes, offline).
        await client.root.send({"content": "thanks!"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended(2))
        assert text_of(client.entries("pi.assistant")[-1]).startswith(
            "(faux model) You said: thanks!"
        )


async def test_a_denied_demo_step_does_not_stop_the_tour(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    async def cancel(facade: Any, request: dict[str, Any], ctx: Context) -> None:
        await facade.submit({"outcome": "cancelled"}, BACKGROUND)

    async def deny_all(facade: Any, request: dict[str, Any], ctx: Context) -> None:
        await facade.decide({"decision": "deny"}, BACKGROUND)

    client = Client(approve=deny_all, answer=cancel)
    async with worker_process(session, agent_env) as worker, connected(client, worker.socket):
        await client.root.send({"content": "demo"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert not (session.cwd / DEMO_NOTES_FILE).exists()
        summary = text_of(client.entries("pi.assistant")[-1])
        assert summary.startswith("That was the offline demo of the faux model.")


async def test_the_tour_in_an_empty_folder_searches_instead_of_reading_a_file_that_is_not_there(
    session: Session, agent_env: dict[str, str]
) -> None:
    """The README starts the tour in a new temporary folder: nothing to read there."""
    for entry in session.cwd.iterdir():
        if entry.is_file():
            entry.unlink()
    assert not any(session.cwd.iterdir())
    client = Client(approve=allow, answer=answer_testing)
    async with worker_process(session, agent_env) as worker, connected(client, worker.socket):
        await client.root.send({"content": "hello"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        tools = [e["name"] for e in client.events if e["type"] == "tool.started"]
        assert tools == ["ls", "find", "question", "write", "edit", "bash"]
        results = [e["model"][0] for e in client.entries("pi.tool_result")]
        assert not any(result["isError"] for result in results), results
        assert (session.cwd / DEMO_NOTES_FILE).exists()
        said = [text_of(entry) for entry in client.entries("pi.assistant")]
        assert said[1].startswith("This folder is empty (a new project?), so there is no file")
        assert "looks empty" not in said[1]  # it is empty: ls said so
        # The summary tells what happened here: nothing was read.
        assert "I listed and read files" not in said[-1]
        assert said[-1].startswith(
            "That was the offline demo of the faux model. I listed this folder (empty, so there "
            "was nothing to read) and searched it, asked you a question, wrote and edited"
        )
