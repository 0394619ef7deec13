"""Headless modes (issue 8 item 6): ``-p`` prints the final answer, ``--json`` streams events."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from worker_support import TIMEOUT, write_script

from coding_agent.cli.headless import EXIT_BLOCKED, run_headless, run_json, run_print
from coding_agent.session_files.folders import Session, list_sessions
from coding_agent.settings.model_config import RegistryError
from coding_agent.worker.main import WorkerBusy, WorkerConfig, open_session_host

pytestmark = pytest.mark.anyio

READ_THEN_ANSWER = [
    {"text": "Reading.", "toolCalls": [{"name": "read", "arguments": {"path": "README.md"}}]},
    {"text": "The README says the answer is 42."},
]


async def test_print_mode_prints_only_the_final_answer(session: Session, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", READ_THEN_ANSWER)
    out = io.StringIO()
    code = await run_print("what is in the README?", session, out=out, faux_script=script)
    assert code == 0
    assert out.getvalue() == "The README says the answer is 42.\n"


async def test_json_mode_streams_each_view_event_then_the_result(
    session: Session, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "s.json", READ_THEN_ANSWER)
    out = io.StringIO()
    assert await run_json("go", session, out=out, faux_script=script) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    types = [line["type"] for line in lines]
    # The first line names the session, the model and the folder.
    assert lines[0] == {
        "type": "session", "session": session.id, "model": "faux/faux-1", "cwd": str(session.cwd)
    }  # fmt: skip
    # (A fresh session then reports its root's configuration: the model and the tools.)
    assert types[1] == "config.changed" and lines[1]["keys"] == ["model", "selectedTools"]
    assert types[2] == "entry.added" and lines[2]["entry"]["kind"] == "pi.user"
    for expected in ("turn.started", "tool.started", "tool.finished", "turn.ended"):
        assert expected in types
    assert types.index("tool.started") < types.index("tool.finished") < types.index("turn.ended")
    assert lines[-1] == {
        "type": "result",
        "ok": True,
        "status": "done",
        "text": "The README says the answer is 42.",
    }


async def test_headless_denies_approval_unless_told_to_allow(
    session: Session, tmp_path: Path
) -> None:
    script = write_script(
        tmp_path / "s.json",
        [
            {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
            {"text": "done"},
        ],
    )
    config = WorkerConfig(session, faux_script=script)
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless("x", config, mode="json", out=out, err=err) == EXIT_BLOCKED == 3
    assert not (session.cwd / "ran.txt").exists()
    assert "denied by headless" in out.getvalue()
    assert json.loads(out.getvalue().splitlines()[-1])["blocked"] == ["bash (touch ran.txt)"]
    assert err.getvalue() == (
        "coding-agent: error: blocked the bash call (touch ran.txt): it needs approval, and "
        "-p/--json asks nobody; allow it with --allowedTools 'Bash(touch ran.txt)', --approve "
        "allow or --permission-mode auto\n"
    )


async def test_headless_allow_runs_the_command(session: Session, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.json",
        [
            {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
            {"text": "done"},
        ],
    )
    out = io.StringIO()
    config = WorkerConfig(session, faux_script=script)
    assert await run_headless("x", config, mode="print", out=out, approve="allow") == 0
    assert (session.cwd / "ran.txt").exists()
    assert out.getvalue() == "done\n"


async def test_a_failed_turn_exits_1_with_the_status(session: Session, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", [{"error": "the model broke"}])
    out = io.StringIO()
    config = WorkerConfig(session, faux_script=script)
    err = io.StringIO()
    assert await run_headless("x", config, mode="json", out=out, err=err) == 1
    result = json.loads(out.getvalue().splitlines()[-1])
    assert result["type"] == "result" and result["ok"] is False and result["status"] != "done"
    assert result["error"] == "the model broke"
    assert err.getvalue() == (
        "coding-agent: error: the turn ended unanswered (model faux/faux-1): the model broke\n"
    )


async def test_a_bad_model_is_refused_before_anything_opens(session: Session) -> None:
    with pytest.raises(RegistryError, match="unknown provider 'nope'"):
        await run_print("x", session, out=io.StringIO(), model="nope/x")
    assert not session.worker_running()
    with pytest.raises(ValueError, match="mode must be"):
        await run_headless("x", WorkerConfig(session), mode="xml", out=io.StringIO())  # type: ignore[arg-type]


async def test_a_session_already_served_is_refused(session: Session) -> None:
    async with open_session_host(WorkerConfig(session)):
        assert session.worker_running()
        with pytest.raises(WorkerBusy, match=f"session {session.id} is already served by pid"):
            await run_print("x", session, out=io.StringIO())
    assert not session.worker_running()


async def test_the_coding_agent_binary_prints_the_answer_and_exits_0(
    project: Path, agent_env: dict[str, str]
) -> None:
    # The real console script (cli.py, owned by the client helper) calling this module, with
    # the offline demo: nobody approves in -p mode, and the tour still ends with its summary.
    binary = Path(sys.executable).with_name("coding-agent")
    command = [str(binary), "-p", "show me around"]
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            command, env=agent_env, cwd=project, check=False, stdin=subprocess.DEVNULL
        )
    # The tour's write, edit and command were blocked: exit 3, one line each on stderr.
    assert result.returncode == 3, result.stderr.decode()
    blocked = result.stderr.decode().splitlines()
    assert [line.split(" call ")[0] for line in blocked] == [
        "coding-agent: error: blocked the write",
        "coding-agent: error: blocked the edit",
        "coding-agent: error: blocked the bash",
    ]
    answer = result.stdout.decode()
    assert answer.startswith("That was the offline demo of the faux model.")
    assert "which were not approved" in answer
    assert answer.endswith("`--model provider/id`.\n")
    assert not (project / "faux-demo-notes.md").exists()
    sessions = list_sessions(project, env=agent_env)
    assert len(sessions) == 1 and os.listdir(sessions[0].storage_dir)  # the turn was stored


async def test_the_coding_agent_binary_streams_json_lines(
    project: Path, agent_env: dict[str, str]
) -> None:
    binary = Path(sys.executable).with_name("coding-agent")
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [str(binary), "--json", "hi"],
            env=agent_env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert result.returncode == 3, result.stderr.decode()  # blocked calls (see above)
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["cwd"] == str(project)
    results = [
        line["entry"]["model"][0]
        for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.tool_result"
    ]
    assert [r["toolName"] for r in results] == ["ls", "read", "question", "write", "edit", "bash"]
    # Nobody is there: the question is cancelled and every change is denied.
    assert [r["isError"] for r in results] == [False, False, True, True, True, True]
    waiting = [line["on"] for line in lines if line["type"] == "tool.waiting"]
    assert waiting == ["approval"] * 3
    assert lines[-1]["type"] == "result" and lines[-1]["ok"] is True
