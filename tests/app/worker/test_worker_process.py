"""The session worker as a real process, used by a client over its Unix socket (issue 8 item 1).

Every test starts ``python -m coding_agent.worker.main`` on a session under a private
``XDG_STATE_HOME`` and talks to it the way the TUI does: a facet host whose requirements come
from :func:`chord.wire.connect_service_source`. The faux model follows a ``--faux-script``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from worker_support import (
    TIMEOUT,
    Client,
    allow,
    connected,
    deny,
    text_of,
    worker_command,
    worker_process,
    write_script,
)

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session, load_session

pytestmark = pytest.mark.anyio

LONG_ANSWER = (
    "The README says that the answer is 42, which is what this sample project is about, "
    "and there is nothing else in it worth mentioning."
)


async def test_a_prompt_streams_the_answer_into_the_remote_view(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path / "script.json", [{"text": LONG_ANSWER}])
    async with worker_process(session, agent_env, "--faux-script", str(script)) as worker:
        assert worker.socket == session.socket_path
        async with connected(Client(), worker.socket) as client:
            await client.root.send({"content": "What does the README say?"}, BACKGROUND)
            await client.wait_for(client.turn_ended)
            (answer,) = client.entries("pi.assistant")
            assert text_of(answer) == LONG_ANSWER
            # While streaming, the view held a partial message: a proper prefix of the answer.
            partials = [
                text_of({"model": [value["turn"]["message"]]})
                for _kind, value in client.views
                if "message" in value.get("turn", {})
            ]
            assert any(
                0 < len(p) < len(LONG_ANSWER) and LONG_ANSWER.startswith(p) for p in partials
            )
            ended = [e for e in client.events if e["type"] == "turn.ended"]
            assert ended[0]["status"] == "done"


async def test_a_tool_call_runs_the_real_read_tool_in_the_project(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(
        tmp_path / "script.json",
        [
            {
                "text": "Reading.",
                "toolCalls": [{"name": "read", "arguments": {"path": "README.md"}}],
            },
            {"text": "It says 42."},
        ],
    )
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(Client(), worker.socket) as client,
    ):
        await client.root.send({"content": "read it"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        (result,) = client.entries("pi.tool_result")
        assert "The answer is 42." in text_of(result)
        assert result["data"]["details"]["path"] == str(session.cwd / "README.md")
        assert text_of(client.entries("pi.assistant")[-1]) == "It says 42."
        # Every built-in tool and the installed features' tools are offered to the model.
        selected = client.view["config"]["selectedTools"]
        assert {"read", "write", "edit", "bash", "grep", "find", "ls", "question"} <= set(selected)


BASH_SCRIPT = [
    {
        "text": "Running it.",
        "toolCalls": [{"name": "bash", "arguments": {"command": "echo made > made.txt; echo ok"}}],
    },
    {"text": "Finished."},
]


async def test_bash_waits_for_approval_and_the_remote_decision_lets_it_run(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path / "script.json", BASH_SCRIPT)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(Client(), worker.socket) as client,
    ):
        await client.root.send({"content": "make a file"}, BACKGROUND)
        await client.wait_for(lambda: bool(client.approvals))
        (dialog,) = client.approvals
        assert dialog.request["name"] == "bash"
        assert dialog.request["args"] == BASH_SCRIPT[0]["toolCalls"][0]["arguments"]  # type: ignore[index]
        assert not (session.cwd / "made.txt").exists()  # nothing ran before the answer
        await allow(dialog.facade, dialog.request, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert not dialog.open  # the dialog closed everywhere once decided
        assert (session.cwd / "made.txt").read_text() == "made\n"
        (result,) = client.entries("pi.tool_result")
        assert "ok" in text_of(result)


async def test_a_denied_bash_call_never_runs(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path / "script.json", BASH_SCRIPT)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(Client(approve=deny), worker.socket) as client,
    ):
        await client.root.send({"content": "make a file"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert not (session.cwd / "made.txt").exists()
        (result,) = client.entries("pi.tool_result")
        assert "denied by test" in text_of(result)


async def test_a_worker_killed_mid_turn_resumes_the_turn_from_storage(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # The turn is parked on the approval of a bash call when the worker dies (SIGKILL). A new
    # worker on the same session resumes the turn: the approval hook asks again (nothing was
    # decided), the client (reconnected by the wire source) allows, and the turn completes.
    script = write_script(tmp_path / "script.json", BASH_SCRIPT)
    client = Client()
    args = ("--faux-script", str(script))
    async with (
        worker_process(session, agent_env, *args) as first,
        connected(client, first.socket),
    ):
        await client.root.send({"content": "make a file"}, BACKGROUND)
        await client.wait_for(lambda: bool(client.approvals))
        await first.kill()
        await client.wait_for(lambda: client.root_closed)
        assert not client.approvals[0].open
        async with worker_process(session, agent_env, *args):
            await client.wait_for(lambda: len(client.approvals) == 2 and client.approvals[1].open)
            again = client.approvals[1]
            assert again.request["callId"] == client.approvals[0].request["callId"]
            await allow(again.facade, again.request, BACKGROUND)
            await client.wait_for(
                lambda: any(
                    e["kind"] == "pi.assistant" and text_of(e) == "Finished."
                    for e in client.view["entries"]
                )
            )
            assert (session.cwd / "made.txt").read_text() == "made\n"
            assert [text_of(e) for e in client.entries("pi.user")] == ["make a file"]
            assert "turn.ended" in client.event_types()


async def test_context_files_reach_the_model_as_a_system_section(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    (session.cwd / "AGENTS.md").write_text("Always answer in haiku.\n")
    (session.cwd.parent / "CLAUDE.md").write_text("The team prefers tabs.\n")
    script = write_script(tmp_path / "script.json", [{"text": "ok"}])
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(Client(), worker.socket) as client,
    ):
        await client.root.send({"content": "hi"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        (system,) = client.entries("pi.system")
        content = system["model"][0]["content"]
        assert "## context-files" in content
        outer = content.index("The team prefers tabs.")
        inner = content.index("Always answer in haiku.")
        assert outer < inner  # the project's own file comes last (most specific)
        assert str(session.cwd / "AGENTS.md") in content


async def test_sigterm_shuts_the_worker_down_cleanly_and_removes_the_socket(
    session: Session, agent_env: dict[str, str]
) -> None:
    async with worker_process(session, agent_env) as worker:
        assert worker.socket.exists()
        assert session.worker_running()
        assert await worker.terminate() == 0
        assert not worker.socket.exists()
        assert not session.worker_running()


async def test_a_second_worker_for_the_same_session_refuses_to_start(
    session: Session, agent_env: dict[str, str]
) -> None:
    async with worker_process(session, agent_env) as worker:
        with anyio.fail_after(TIMEOUT):
            second = await anyio.run_process(
                worker_command(session), env=agent_env, check=False, stdin=subprocess.DEVNULL
            )
        assert second.returncode == 3
        assert f"already served by pid {worker.process.pid}" in second.stderr.decode()
        assert second.stdout == b""


async def test_a_folder_that_is_not_a_session_is_a_usage_error(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    command = [sys.executable, "-m", "coding_agent.worker.main", str(tmp_path)]
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(command, env=agent_env, check=False)
    assert result.returncode == 2
    assert "not a session folder (no session.json)" in result.stderr.decode()


async def test_an_unknown_model_exits_4_naming_it(
    session: Session, agent_env: dict[str, str]
) -> None:
    command = worker_command(session, "--model", "nowhere/x")
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(command, env=agent_env, check=False)
    assert result.returncode == 4  # EXIT_MODEL: the CLI reports it as a model failure (1)
    assert "unknown provider 'nowhere'" in result.stderr.decode()
    assert load_session(session.path).id == session.id  # the session folder is untouched


async def test_bash_output_is_live_in_the_view_while_the_command_runs(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # The command prints, then waits for a file the test creates only once it saw the output.
    command = "echo started; while [ ! -f go ]; do sleep 0.02; done; echo finished"
    script = write_script(
        tmp_path / "script.json",
        [{"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "ok"}],
    )

    def live_output() -> str:
        turn = client.view.get("turn") or {}
        return "".join(slot.get("output", "") for slot in turn.get("tools", []))

    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "run it"}, BACKGROUND)
        await client.wait_for(lambda: "started" in live_output())
        assert "finished" not in live_output()
        (session.cwd / "go").touch()
        await client.wait_for(client.turn_ended)
        (result,) = client.entries("pi.tool_result")
        assert text_of(result) == "started\nfinished"


async def test_a_folder_read_early_in_a_long_tool_step_brings_its_agents_md(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # The facet looks at the entries new since its last look in growing pages (8 first): the
    # call that read pkg/ is the oldest of the step's ~30 new entries, beyond the first page.
    (session.cwd / "pkg").mkdir()
    (session.cwd / "pkg" / "notes.txt").write_text("notes\n")
    (session.cwd / "pkg" / "AGENTS.md").write_text("In pkg, name things plainly.\n")
    reads = [{"name": "read", "arguments": {"path": "pkg/notes.txt"}}]
    reads += [{"name": "read", "arguments": {"path": "README.md"}} for _ in range(12)]
    script = write_script(
        tmp_path / "script.json",
        [{"text": "Reading.", "toolCalls": reads}, {"text": "Read."}],
    )
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(Client(), worker.socket) as client,
    ):
        await client.root.send({"content": "read them"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert len(client.entries("pi.tool_result")) == 13
        first, *_, last = client.entries("pi.system")
        assert "In pkg, name things plainly." not in first["model"][0]["content"]
        assert "In pkg, name things plainly." in last["model"][0]["content"]


async def test_a_path_scoped_claude_rule_joins_once_the_model_reads_a_matching_file(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    rules = session.cwd / ".claude" / "rules"
    rules.mkdir(parents=True)
    (rules / "always.md").write_text("Answer tersely.\n")
    (rules / "api.md").write_text('---\npaths:\n  - "api/**/*.py"\n---\nAPI: validate input.\n')
    (session.cwd / "api" / "v1").mkdir(parents=True)
    (session.cwd / "api" / "v1" / "users.py").write_text("x = 1\n")
    script = write_script(
        tmp_path / "script.json",
        [
            {"toolCalls": [{"name": "read", "arguments": {"path": "api/v1/users.py"}}]},
            {"text": "Read."},
        ],
    )
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(Client(), worker.socket) as client,
    ):
        await client.root.send({"content": "read it"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        first, *_, last = client.entries("pi.system")
        assert "Answer tersely." in first["model"][0]["content"]
        assert "API: validate input." not in first["model"][0]["content"]
        assert "API: validate input." in last["model"][0]["content"]
        assert "paths:" not in last["model"][0]["content"]
